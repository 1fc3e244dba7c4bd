#!/usr/bin/env bash
# Long fuzzing runs (issue 17): every libFuzzer harness of tests/fuzz, one after another, for
# SECONDS each (default 600), from its committed seeds plus a corpus kept between runs in
# .cache/fuzz/<harness>. Builds build-asan (clang, ASan + UBSan, libFuzzer) when needed.
#   bench/fuzz/run.sh [SECONDS] [harness…]       e.g. bench/fuzz/run.sh 60 fuzz_protocol
# Prints and saves (bench/results/fuzz/<date>.md) each harness's executions and findings; a
# finding's input is in build-asan/tests/fuzz/fuzz-artifacts/. Exits non-zero on any finding.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
asan=${ROOTSPEC_ASAN_BUILD_DIR:-$root/build-asan}
seconds=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_protocol fuzz_tokenizer fuzz_tokenizer_json fuzz_chat_template
                                         fuzz_model_files fuzz_daemon_config fuzz_http_request)
if [ ! -f "$asan/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DROOTSPEC_WITH_TORCH=OFF -DROOTSPEC_BUILD_BENCH=OFF -DROOTSPEC_SANITIZE=ON -DROOTSPEC_FUZZ=ON >&2
fi
cmake --build "$asan" -j2 --target "${harnesses[@]}" >&2
bash "$root/tests/prepare/tokenizer_peer.sh" >&2  # fuzz_tokenizer's vocabularies
machine="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
mkdir -p "$root/bench/results/fuzz"
report=$root/bench/results/fuzz/$(date -u +%Y-%m-%d).md
{
  echo "# Fuzzing, $(date -u +%Y-%m-%d), $machine, ${seconds} s per harness (bench/fuzz/run.sh)"
  echo
  echo "| harness | executions | execs/s | corpus | findings |"
  echo "|---|---:|---:|---:|---|"
} > "$report"
failed=0
mkdir -p "$asan/tests/fuzz/fuzz-artifacts"
for h in "${harnesses[@]}"; do
  corpus=$root/.cache/fuzz/$h
  mkdir -p "$corpus"
  log=$(mktemp)
  echo "bench/fuzz: $h for $seconds s" >&2
  status=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$asan/tests/fuzz/$h" -max_total_time="$seconds" -timeout=10 -malloc_limit_mb=512 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$asan/tests/fuzz/fuzz-artifacts/$h-" "$corpus" \
    "$root/tests/fuzz/corpus/$h" >"$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  size=$(find "$corpus" -type f | wc -l)
  finding=none
  if [ "$status" != 0 ]; then
    finding="exit $status: $(grep -m1 -E 'ERROR|contract broken|Sanitizer|out-of-memory|timeout' "$log" || echo see log)"
    failed=1
    cp "$log" "$asan/tests/fuzz/fuzz-artifacts/$h.log"
  fi
  echo "| $h | ${execs:-?} | ${rate:-?} | $size | $finding |" >> "$report"
  rm -f "$log"
done
cat "$report"
echo "bench/fuzz: saved $report" >&2
exit $failed
