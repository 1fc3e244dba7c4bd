#!/usr/bin/env bash
# Runs one libFuzzer harness from its committed seed corpus for a bounded time.
#   run_fuzzer.sh FUZZER SEED_CORPUS SECONDS [extra libFuzzer flags…]   (ROOTSPEC_FUZZ_SECONDS overrides)
# New inputs go to a scratch corpus (the committed one stays small); a finding is saved as
# $ROOTSPEC_FUZZ_ARTIFACTS/<kind>-<hash> (default: the build's fuzz-artifacts/) and fails the run.
# Limits: 10 s per input (a hang), 512 MB in one allocation and 2 GB resident (unbounded
# allocations are findings).
set -euo pipefail
fuzzer=$1 seeds=$2 seconds=${ROOTSPEC_FUZZ_SECONDS:-$3}  # the environment wins (bench, CI)
shift 3
name=$(basename "$fuzzer")
artifacts=${ROOTSPEC_FUZZ_ARTIFACTS:-$(dirname "$fuzzer")/fuzz-artifacts}
mkdir -p "$artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
[ -d "$seeds" ] || { echo "$name: no seed corpus at $seeds" >&2; exit 2; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# -jobs/-workers stay 1: ctest runs two harnesses at once on a 2-core machine.
set +e
"$fuzzer" -max_total_time="$seconds" -timeout=10 -malloc_limit_mb=512 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/$name-" "$@" "$scratch" "$seeds" 2>&1 |
  grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)'
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || echo "$name: FINDING (exit $status); the input is in $artifacts" >&2
exit "$status"
