#!/usr/bin/env bash
# Starts a pair with its gateway (launch/rootspec up), runs bench/http/load.cjs against it and
# stops the pair. Reports latency p50 / p99, time to first text and queue wait; asserts nothing.
#   bench/http/run.sh [--config configs/random-cpu.toml] [clients requests max_tokens chat]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
config=$root/configs/random-cpu.toml
[ "${1:-}" = --config ] && { config=$2; shift 2; }
bash "$root/tests/prepare/http_peer.sh" >&2
peer=${ROOTSPEC_HTTP_PEER:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/npm-http}
export ROOTSPEC_RUN_DIR=${ROOTSPEC_RUN_DIR:-$(mktemp -d)}
mkdir -p "$ROOTSPEC_RUN_DIR"
"$root/launch/rootspec" up --config "$config" --set http.listen=127.0.0.1:0 >"$ROOTSPEC_RUN_DIR/up.out" 2>&1 &
launcher=$!
trap '"$root/launch/rootspec" down >/dev/null 2>&1 || true; wait $launcher 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  grep -q "OpenAI-compatible HTTP at" "$ROOTSPEC_RUN_DIR/up.out" 2>/dev/null && break
  kill -0 $launcher 2>/dev/null || { cat "$ROOTSPEC_RUN_DIR/up.out" >&2; exit 1; }
  sleep 0.5
done
url=$(grep -o "HTTP at http://[^ ]*" "$ROOTSPEC_RUN_DIR/up.out" | sed 's|HTTP at ||; s|/v1$||')
echo "bench/http: $url ($(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores)" >&2
NODE_PATH=$peer/node_modules node "$root/bench/http/load.cjs" "$url" "$@"
