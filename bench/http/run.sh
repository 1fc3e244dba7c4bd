#!/usr/bin/env bash
# The load benchmark of the HTTP gateway: starts a pair with its gateway (bench/up_pair.bash,
# launch/rootspec up), runs bench/http/load.cjs against it and stops the pair. load.cjs drives N
# concurrent streaming clients (the `openai` npm client) plus M held idle or slow connections and a
# /health probe, and reports throughput, TTFT / TPOT / latency p50 / p90 / p99, errors by kind, what
# happened to the held connections, the probe's latency, and the gateway's memory and the sockets it
# still holds afterwards. Timing only: it asserts nothing.
#   bench/http/run.sh [--config configs/random-cpu.toml] [--set section.key=value …] [load.cjs flags]
#   bench/http/run.sh --help                  load.cjs's flags
# The old form still works: bench/http/run.sh [--config C] [clients requests max_tokens chat].
# Raises the open-file limit (soft to hard) first: each held connection is a descriptor here and in
# the gateway (which inherits the limit through the launcher).
#   e.g. bench/http/run.sh --set target.max_batch=8 --clients 8 --requests 4 --idle 100 --json out.json
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
config=$root/configs/random-cpu.toml
sets=()
load_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --config=*) config=${1#*=}; shift ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --set=*) sets+=(--set "${1#*=}"); shift ;;
    -h|--help) exec node "$root/bench/http/load.cjs" --help ;;
    *) load_args+=("$1"); shift ;;
  esac
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || echo "bench/http: could not raise ulimit -n (now $(ulimit -n))" >&2
bash "$root/tests/prepare/http_peer.sh" >&2
peer=${ROOTSPEC_HTTP_PEER:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/npm-http}
source "$root/bench/up_pair.bash"
up_pair "$config" "${sets[@]}"
echo "bench/http: $url ($machine; ulimit -n $(ulimit -n); gateway pid $(awk '{print $3}' "$ROOTSPEC_RUN_DIR/pids"))" >&2
NODE_PATH=$peer/node_modules node "$root/bench/http/load.cjs" "$url" "${load_args[@]}"
