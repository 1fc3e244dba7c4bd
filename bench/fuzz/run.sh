#!/usr/bin/env bash
# Long fuzzing runs: every libFuzzer harness of tests/fuzz for SECONDS each (default
# 600) or ROOTSPEC_FUZZ_RUNS executions, whichever comes first, ROOTSPEC_FUZZ_JOBS at a time
# (default 1), from its committed seeds plus a corpus kept between runs in .cache/fuzz/<harness>.
# Builds build-asan (clang, ASan + UBSan, libFuzzer) when needed.
#   bench/fuzz/run.sh [SECONDS] [harness…]       e.g. bench/fuzz/run.sh 60 fuzz_protocol
# Prints and saves (bench/results/fuzzing-long-runs-<date>/<date>.md; list the folder in
# bench/results/README.md) each harness's executions and findings; a
# finding's input is in build-asan/tests/fuzz/fuzz-artifacts/. Exits non-zero on any finding.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
asan=${ROOTSPEC_ASAN_BUILD_DIR:-$root/build-asan}
seconds=${1:-600}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_protocol fuzz_tokenizer fuzz_tokenizer_json fuzz_chat_template
                                         fuzz_model_files fuzz_daemon_config fuzz_http_request
                                         fuzz_grammar_compile fuzz_grammar_matcher)
if [ ! -f "$asan/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DROOTSPEC_WITH_TORCH=OFF -DROOTSPEC_BUILD_BENCH=OFF -DROOTSPEC_SANITIZE=ON -DROOTSPEC_FUZZ=ON >&2
fi
cmake --build "$asan" -j2 --target "${harnesses[@]}" >&2
bash "$root/tests/prepare/tokenizer_peer.sh" >&2  # fuzz_tokenizer's vocabularies
machine="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
day=$(date -u +%Y-%m-%d)
mkdir -p "$root/bench/results/fuzzing-long-runs-$day"
report=$root/bench/results/fuzzing-long-runs-$day/$day.md
{
  echo "# Fuzzing, $(date -u +%Y-%m-%d), $machine: up to ${seconds} s or ${ROOTSPEC_FUZZ_RUNS:-unlimited} executions per harness, ${ROOTSPEC_FUZZ_JOBS:-1} at a time (bench/fuzz/run.sh)"
  echo
  echo "| harness | executions | execs/s | corpus | findings |"
  echo "|---|---:|---:|---:|---|"
} > "$report"
mkdir -p "$asan/tests/fuzz/fuzz-artifacts"
rows=$(mktemp -d)
seeds_extra=$(mktemp -d)  # seeds made from outside data (schema_seeds)
trap 'rm -rf "$rows" "$seeds_extra"' EXIT
# fuzz_grammar_compile also starts from the real schemas of the JSON Schema corpus
# (tests/prepare/schema_corpus.sh): each up to 16 KB as a JSON-schema input (mode byte 2: no
# whitespace, JSON Schema's semantics; 0x22: strict), not only from the hand-written seeds.
schema_seeds() {
  local dir=$1
  bash "$root/tests/prepare/schema_corpus.sh" >&2
  local corpus=${ROOTSPEC_SCHEMA_CORPUS:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/schema-corpus}
  /usr/bin/python3 - "$corpus/corpus.jsonl" "$dir" <<'PY'
import json, sys
n = 0
for i, line in enumerate(open(sys.argv[1], encoding="utf-8")):
    text = json.dumps(json.loads(line)["schema"], ensure_ascii=False, separators=(",", ":")).encode()
    if len(text) > 16384:
        continue
    for mode in (0x02, 0x22):
        with open(f"{sys.argv[2]}/schema-{i}-{mode:02x}", "wb") as f:
            f.write(bytes([mode]) + text)
        n += 1
print(f"bench/fuzz: {n} seeds from the schema corpus", file=sys.stderr)
PY
}
for h in "${harnesses[@]}"; do
  [ "$h" = fuzz_grammar_compile ] && schema_seeds "$seeds_extra"
done

# One harness: its report row in $rows/<harness>; exit status non-zero on a finding.
fuzz_one() {
  local h=$1 corpus=$root/.cache/fuzz/$1 log=$rows/$1.log status=0 extra=()
  [ "$h" = fuzz_grammar_compile ] && extra=("$seeds_extra")
  mkdir -p "$corpus"
  echo "bench/fuzz: $h for up to $seconds s" >&2
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$asan/tests/fuzz/$h" -max_total_time="$seconds" -runs="${ROOTSPEC_FUZZ_RUNS:--1}" -timeout=10 \
    -malloc_limit_mb=512 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$asan/tests/fuzz/fuzz-artifacts/$h-" "$corpus" "$root/tests/fuzz/corpus/$h" ${extra[@]+"${extra[@]}"} \
    >"$log" 2>&1 || status=$?
  local execs rate size finding=none
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  size=$(find "$corpus" -type f | wc -l)
  if [ "$status" != 0 ]; then
    finding="exit $status: $(grep -m1 -E 'ERROR|contract broken|Sanitizer|out-of-memory|timeout' "$log" || echo see log)"
    cp "$log" "$asan/tests/fuzz/fuzz-artifacts/$h.log"
  fi
  echo "| $h | ${execs:-?} | ${rate:-?} | $size | $finding |" > "$rows/$h"
  return "$status"
}
failed=0
running=0
for h in "${harnesses[@]}"; do
  if [ "$running" -ge "${ROOTSPEC_FUZZ_JOBS:-1}" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  fuzz_one "$h" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
for h in "${harnesses[@]}"; do cat "$rows/$h" >> "$report"; done
cat "$report"
echo "bench/fuzz: saved $report" >&2
exit $failed
