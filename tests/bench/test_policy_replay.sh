#!/usr/bin/env bash
# rootspec-policy-replay end to end on the shipped pair: a small replay writes a summary row per
# regime and concurrency and a CSV row per choice, two runs write the same figures (the times come
# from the regimes, not the clock), and a missing regimes file is refused with its name.
# Usage: test_policy_replay.sh BUILD_DIR SOURCE_DIR [twice|once]   (once: no second run, no
# determinism check; the sanitizer build's, where the first run is all the evidence)
set -euo pipefail
build=$1 root=$2 runs=${3:-twice}
replay=$build/bench/replay/rootspec-policy-replay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$root"
args=(--config configs/small-cpu.toml --regimes bench/replay/regimes.json --concurrency 1,2 --temperatures 0
  --budgets 2,4 --max-new-tokens 8 --requests 2 --warmup-runs 1)

"$replay" "${args[@]}" --out "$work/a" > "$work/a.txt" 2>&1 || fail "the replay exited $? ($(tail -3 "$work/a.txt"))"
# 3 regimes × 2 concurrency levels, after the table's header line.
[ "$(grep -c '^| ' "$work/a/summary.md")" -eq 7 ] || fail "summary.md: $(grep -c '^| ' "$work/a/summary.md") table lines, 7 expected"
# A header, then per regime and concurrency ar, 2 rules × 2 budgets and auto: 3 × 2 × 6 rows.
[ "$(wc -l < "$work/a/replay.csv")" -eq 37 ] || fail "replay.csv: $(wc -l < "$work/a/replay.csv") lines, 37 expected"
grep -q '^gpu-8b-h200,0,2,auto,16,' "$work/a/replay.csv" || fail "no auto row of 16 tokens for gpu-8b-h200 at concurrency 2"

if [ "$runs" = twice ]; then
  "$replay" "${args[@]}" --out "$work/b" > "$work/b.txt" 2>&1 || fail "the second replay exited $?"
  cmp -s "$work/a/replay.csv" "$work/b/replay.csv" || fail "two replays differ: $(diff "$work/a/replay.csv" "$work/b/replay.csv" | head -4)"
fi

if "$replay" --regimes "$work/none.json" > "$work/bad.txt" 2>&1; then fail "a missing regimes file was accepted"; fi
grep -q "none.json" "$work/bad.txt" || fail "the refusal does not name the file: $(cat "$work/bad.txt")"
echo "ok"
