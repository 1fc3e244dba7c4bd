#!/usr/bin/env bash
# Speculation's gain over `ar` under each sampling parameter, against its gain without any, on
# the shipped pair: one rootspec-bench run per parameter set (each with its own `ar`), then one
# table (bench/analysis/sampling_gains.py). Penalties and biases at T = 0 (greedy, where they
# change the output) and T = 1; the cuts (top_k, top_p, min_p) at T = 1 (at T = 0 they change
# nothing).
# Usage: bench/sampling/processor_gains.sh [OUT] [extra rootspec-bench arguments]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/bench-out/sampling-gains}
shift || true
extra=("$@")
bench=$root/build/bench/harness/rootspec-bench
common=(--launch "$root/configs/small-cpu.toml" --prompts "$root/bench/prompts/python-docs.jsonl"
  --decoders ar,root-draw,auto --budgets 8 --max-new-tokens 128 --limit-prompts 16 --warmup 2 --seed 1)
run() {  # name temperatures sampling
  echo "== $1 (T $2) ${3:-}" >&2
  "$bench" "${common[@]}" --temperatures "$2" ${3:+--sampling "$3"} --out "$out/$1" "${extra[@]}" >/dev/null
}
mkdir -p "$out"
run none 0,1 ""
run presence 0,1 "presence_penalty=0.5"
run frequency 0,1 "frequency_penalty=0.5"
run repetition 0,1 "repetition_penalty=1.2"
run logit_bias 0,1 "logit_bias=32:2,logit_bias=101:-3"
run top_k 1 "top_k=20"
run top_p 1 "top_p=0.9"
run min_p 1 "min_p=0.05"
run all 1 "presence_penalty=0.3,frequency_penalty=0.3,repetition_penalty=1.1,logit_bias=32:1,top_k=40,top_p=0.9,min_p=0.02"
python3 "$root/bench/analysis/sampling_gains.py" "$out"
