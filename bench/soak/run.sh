#!/usr/bin/env bash
# The soak (issue 17; a benchmark, not a test): starts the shipped pair and its gateway with
# `launch/rootspec up` (which restarts the drafter the soak kills), runs bench/soak/soak.cjs
# against it, stops the pair, and saves the summary and the logs' sizes.
#   bench/soak/run.sh [--config configs/small-cpu.toml] [requests (10000)] [clients (12)]
# Results: bench/results/soak/<date>.json (one JSON line), with the machine named.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
config=$root/configs/small-cpu.toml
[ "${1:-}" = --config ] && { config=$2; shift 2; }
export ROOTSPEC_RUN_DIR=${ROOTSPEC_RUN_DIR:-$(mktemp -d)}
mkdir -p "$ROOTSPEC_RUN_DIR"
# Enough queue for every client (a 429 would count as a failure), and a short peer timeout.
"$root/launch/rootspec" up --config "$config" --set http.listen=127.0.0.1:0 --set http.queue_depth=${ROOTSPEC_SOAK_QUEUE_DEPTH:-64} \
  >"$ROOTSPEC_RUN_DIR/up.out" 2>&1 &
launcher=$!
trap '"$root/launch/rootspec" down >/dev/null 2>&1 || true; wait $launcher 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  grep -q "OpenAI-compatible HTTP at" "$ROOTSPEC_RUN_DIR/up.out" 2>/dev/null && break
  kill -0 $launcher 2>/dev/null || { cat "$ROOTSPEC_RUN_DIR/up.out" >&2; exit 1; }
  sleep 0.5
done
url=$(grep -o "HTTP at http://[^ ]*" "$ROOTSPEC_RUN_DIR/up.out" | sed 's|HTTP at ||; s|/v1$||')
machine="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo "bench/soak: $url on $machine; logs in $ROOTSPEC_RUN_DIR" >&2
status=0
summary=$(node "$root/bench/soak/soak.cjs" "$url" "$ROOTSPEC_RUN_DIR" "$@") || status=$?
mkdir -p "$root/bench/results/soak"
out=$root/bench/results/soak/$(date -u +%Y-%m-%d).json
echo "$summary" | jq -c --arg machine "$machine" --arg config "${config#$root/}" '. + {machine: $machine, config: $config}' > "$out"
jq . "$out"
echo "bench/soak: $([ $status = 0 ] && echo PASS || echo FAIL); saved $out; the launcher's log:" >&2
grep -E "exited|restarting" "$ROOTSPEC_RUN_DIR/up.out" >&2 || true
exit $status
