# Sourced by bench scripts: `up_pair CONFIG [--set …]` starts the pair and its gateway with
# `launch/rootspec up` in the background (logs and pid file in $ROOTSPEC_RUN_DIR, a fresh folder
# by default), waits until the gateway listens, sets `url` (http://host:port) and `machine` (CPU
# model and cores), and stops everything when the script exits. Needs `root` (the checkout).
up_pair() {
  local config=$1
  shift
  export ROOTSPEC_RUN_DIR=${ROOTSPEC_RUN_DIR:-$(mktemp -d)}
  mkdir -p "$ROOTSPEC_RUN_DIR"
  "$root/launch/rootspec" up --config "$config" --set http.listen=127.0.0.1:0 "$@" >"$ROOTSPEC_RUN_DIR/up.out" 2>&1 &
  launcher=$!
  trap '"$root/launch/rootspec" down >/dev/null 2>&1 || true; wait $launcher 2>/dev/null || true' EXIT
  for _ in $(seq 600); do
    grep -q "OpenAI-compatible HTTP at" "$ROOTSPEC_RUN_DIR/up.out" 2>/dev/null && break
    kill -0 $launcher 2>/dev/null || { cat "$ROOTSPEC_RUN_DIR/up.out" >&2; exit 1; }
    sleep 0.5
  done
  url=$(grep -o "HTTP at http://[^ ]*" "$ROOTSPEC_RUN_DIR/up.out" | sed 's|HTTP at ||; s|/v1$||')
  machine="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
}
