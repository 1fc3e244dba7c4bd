#!/usr/bin/env bash
# Speculation under a JSON schema on the shipped pair (models/small-*, configs/small-cpu.toml):
#  1. speed: one rootspec-bench run unconstrained and one with every request constrained to
#     bench/grammar/package-schema.json (each with its own `ar`), then the table of
#     bench/analysis/sampling_gains.py: tok/s, speedup over `ar` with its 95% interval, accepted
#     tokens per round, and the constrained speedup over the unconstrained one;
#  2. tree rows: rootspec-generate --json on the first N prompts, root-draw B 8, with the drafter
#     masking its rows and with it off (--drafter-unprocessed): pool candidates, the share the
#     round pruned because the grammar refuses their path, tree rows, and accepted tokens per
#     round. Every tree row is a grammatical token by construction (the round prunes first:
#     round.h grammatical_pool); the pruned share is what an unmasked drafter wasted.
# Usage: bench/grammar/structured_gain.sh [OUT] [extra rootspec-bench arguments]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/bench-out/structured-gain}
shift || true
extra=("$@")
bench=$root/build/bench/harness/rootspec-bench
schema=$root/bench/grammar/package-schema.json
common=(--launch "$root/configs/small-cpu.toml" --prompts "$root/bench/prompts/python-docs.jsonl"
  --decoders ar,root-draw,auto --budgets 8 --temperatures 0,1 --max-new-tokens 128 --limit-prompts 16
  --warmup 2 --seed 1)
mkdir -p "$out"
echo "== unconstrained" >&2
"$bench" "${common[@]}" --out "$out/none" "${extra[@]}" >/dev/null
echo "== json_schema" >&2
"$bench" "${common[@]}" --json-schema "$schema" --out "$out/json_schema" "${extra[@]}" >/dev/null
python3 "$root/bench/analysis/sampling_gains.py" "$out" | tee "$out/speed.md"

GEN=$root/build/tools/generate/rootspec-generate TOK=$root/build/tools/tokenize/rootspec-tokenize \
  SCHEMA=$schema N_PROMPTS=${N_PROMPTS:-8} ROOT=$root python3 - <<'PY' | tee "$out/tree-rows.md"
import json, os, subprocess
gen, tok, schema, root = os.environ["GEN"], os.environ["TOK"], os.environ["SCHEMA"], os.environ["ROOT"]
target, drafter = f"{root}/models/small-target", f"{root}/models/small-drafter"
prompts = []
with open(f"{root}/bench/prompts/python-docs.jsonl") as f:
    for line in f:
        text = json.loads(line)["prompt"]
        ids = subprocess.run([tok, "--model", target, "--encode", text, "--special"], check=True,
                             capture_output=True, text=True).stdout.split()
        prompts.append(",".join(ids))
prompts = prompts[: int(os.environ["N_PROMPTS"])]
print("| drafter rows | T | pool candidates per round | pruned by the grammar | tree rows per round | accepted per round |")
print("|---|---|---|---|---|---|")
for masked in (True, False):
    for t in (0, 1):
        pool = pruned = tree = acc = rounds = 0
        for i, p in enumerate(prompts):
            cmd = [gen, "--target", target, "--drafter", drafter, "--prompt-ids", p, "--max-new-tokens", "128",
                   "--rule", "root-draw", "--verifier", "residual", "--budget", "8", "--temperature", str(t),
                   "--seed", str(i + 1), "--json-schema", schema, "--json", "--top-k", "2", "--depth", "7",
                   "--expand", "1"]
            if not masked:
                cmd.append("--drafter-unprocessed")
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            for rd in r["rounds"]:
                if rd["pool_nodes"] == 0:
                    continue
                rounds += 1
                pool += rd["pool_nodes"]; pruned += rd["pool_pruned"]; tree += rd["tree_nodes"]; acc += rd["accepted"]
        print(f"| {'masked' if masked else 'unmasked'} | {t} | {pool / rounds:.1f} | {100 * pruned / max(pool, 1):.1f}% "
              f"| {tree / rounds:.2f} | {acc / rounds:.2f} |")
PY
