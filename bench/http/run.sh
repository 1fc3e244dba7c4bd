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
source "$root/bench/up_pair.bash"
up_pair "$config"
echo "bench/http: $url ($machine)" >&2
NODE_PATH=$peer/node_modules node "$root/bench/http/load.cjs" "$url" "$@"
