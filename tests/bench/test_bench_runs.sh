#!/usr/bin/env bash
# rootspec-bench end to end on the random pair (real processes): a paired run ([TPR] App.
# D.14) and a serving run at two concurrency levels, each started with --launch and stopped at
# the end, must exit 0 and write their outputs with one record per decode.
# Usage: test_bench_runs.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 root=$2
bench=$build/bench/harness/rootspec-bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--launch "$root/configs/random-cpu.toml" --build-dir "$build" --root "$root"
  --set "endpoints.client=ipc://$work/client.sock" --set "endpoints.drafter=ipc://$work/drafter.sock"
  --limit-prompts 3 --decoders ar,root-draw --temperatures 0 --budgets 8 --max-new-tokens 8 --warmup 1)
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bench" "${common[@]}" --out "$work/paired" > "$work/paired.txt" 2> "$work/paired.err" ||
  fail "the paired run exited $? ($(tail -3 "$work/paired.err"))"
# 3 prompts × 2 combinations + 1 warm-up prompt × 2 = 8 decodes, a header line besides.
[ "$(wc -l < "$work/paired/records.csv")" -eq 9 ] || fail "paired records.csv: $(wc -l < "$work/paired/records.csv") lines, 9 expected"
python3 - "$work/paired/summary.json" <<'PY' || fail "paired summary.json"
import json, sys
j = json.load(open(sys.argv[1]))
run = j["run"]
assert run["decodes_planned"] == 8 and run["decodes_done"] == 8, run
assert run["failures"] == [] and not run["interrupted"] and not run["target_gone"], run
PY
grep -q "^root-draw " "$work/paired.txt" || fail "the paired table has no root-draw row"

"$bench" "${common[@]}" --concurrency 1,2 --trace --out "$work/serving" > "$work/serving.txt" 2> "$work/serving.err" ||
  fail "the serving run exited $? ($(tail -3 "$work/serving.err"))"
# Two levels × 2 combinations: a row each, and (3 + 1 warm-up) records each.
[ "$(wc -l < "$work/serving/concurrency.csv")" -eq 5 ] || fail "concurrency.csv: $(wc -l < "$work/serving/concurrency.csv") lines, 5 expected"
[ "$(wc -l < "$work/serving/records.csv")" -eq 17 ] || fail "serving records.csv: $(wc -l < "$work/serving/records.csv") lines, 17 expected"
[ -s "$work/serving/trace.jsonl" ] || fail "no trace.jsonl"
python3 - "$work/serving/summary.json" <<'PY' || fail "serving summary.json"
import json, sys
j = json.load(open(sys.argv[1]))
assert [l["concurrency"] for l in j["levels"]] == [1, 2], j["levels"]
assert j["run"]["failures"] == 0 and j["run"]["error"] == "", j["run"]
PY
echo "rootspec-bench: a paired and a serving run, outputs as expected"
