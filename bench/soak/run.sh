#!/usr/bin/env bash
# The soak (a benchmark, not a test): starts the shipped pair and its gateway with
# `launch/rootspec up` (which restarts the drafter the soak kills), runs bench/soak/soak.cjs
# against it, stops the pair, and saves the summary.
#   bench/soak/run.sh [--config configs/small-cpu.toml] [requests (10000)] [clients (12)]
#   ROOTSPEC_SOAK_MAX_BATCH=16 bench/soak/run.sh … 16   the batched soak: the target decodes up to
#                                                        16 requests at once ([target] max_batch)
# Results: bench/results/soak-10000-requests-<date>/<date>[-batchN].json (one JSON line), with the
# machine named; list the folder in bench/results/README.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
config=$root/configs/small-cpu.toml
[ "${1:-}" = --config ] && { config=$2; shift 2; }
source "$root/bench/up_pair.bash"
# Enough queue for every client (a 429 would count as a failure).
max_batch=${ROOTSPEC_SOAK_MAX_BATCH:-1}
up_pair "$config" --set http.queue_depth="${ROOTSPEC_SOAK_QUEUE_DEPTH:-64}" --set target.max_batch="$max_batch"
echo "bench/soak: $url on $machine; logs in $ROOTSPEC_RUN_DIR" >&2
status=0
summary=$(node "$root/bench/soak/soak.cjs" "$url" "$ROOTSPEC_RUN_DIR" "$@") || status=$?
day=$(date -u +%Y-%m-%d)
mkdir -p "$root/bench/results/soak-10000-requests-$day"
out=$root/bench/results/soak-10000-requests-$day/$day$([ "$max_batch" = 1 ] || echo "-batch$max_batch").json
echo "$summary" | jq -c --arg machine "$machine" --arg config "${config#$root/}" --argjson max_batch "$max_batch" \
  '. + {machine: $machine, config: $config, max_batch: $max_batch}' > "$out"
jq . "$out"
echo "bench/soak: $([ $status = 0 ] && echo PASS || echo FAIL); saved $out; the launcher's log:" >&2
grep -E "exited|restarting" "$ROOTSPEC_RUN_DIR/up.out" >&2 || true
exit $status
