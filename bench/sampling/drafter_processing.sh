#!/usr/bin/env bash
# Acceptance with the drafter processing its rows by the request's sampling parameters
# (common/model/runtime_drafter.h) against raw draft rows
# (`rootspec-generate --drafter-unprocessed`, the daemon's `[drafter] process_rows = false`), on
# the shipped pair (models/small-target, models/small-drafter) with configs/small-cpu.toml's pool
# (top-k 2, depth 7, expand 1; fixed depth here), verifier residual, budget 8.
#
# For each parameter set, temperature and rule: the first N_PROMPTS prompts of
# bench/prompts/python-docs.jsonl (BOS + bytes), TOKENS new tokens each (EOS ignored), seed = the
# prompt's index + 1 at T = 1, the same for both switches. Prints a Markdown table of the mean
# accepted tokens per round (all rounds of all prompts: accepted tokens / rounds; rootspec-generate
# --json's rounds[].accepted) with the drafter's rows unprocessed and processed, and at T = 0
# whether both gave the same tokens (they must: the output is exact either way).
#
# Usage: bench/sampling/drafter_processing.sh            (BUILD=build N_PROMPTS=16 TOKENS=64)
# Token counts, not times: the figures do not depend on the machine's speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N_PROMPTS=${N_PROMPTS:-16}
TOKENS=${TOKENS:-64}
export GEN="$BUILD/tools/generate/rootspec-generate" TOK="$BUILD/tools/tokenize/rootspec-tokenize"
export N_PROMPTS TOKENS
for bin in "$GEN" "$TOK"; do
  [[ -x $bin ]] || { echo "missing $bin: build rootspec-generate and rootspec-tokenize first" >&2; exit 1; }
done

python3 - <<'EOF'
import json, os, subprocess

gen, tok = os.environ["GEN"], os.environ["TOK"]
n_prompts, tokens = int(os.environ["N_PROMPTS"]), int(os.environ["TOKENS"])
target, drafter = "models/small-target", "models/small-drafter"
pool = ["--top-k", "2", "--depth", "7", "--expand", "1"]

prompts = []
with open("bench/prompts/python-docs.jsonl") as f:
    for line in f:
        text = json.loads(line)["prompt"]
        ids = subprocess.run([tok, "--model", target, "--encode", text, "--special"], check=True,
                             capture_output=True, text=True).stdout.split()
        prompts.append(",".join(ids))
prompts = prompts[:n_prompts]

# (name, rootspec-generate flags, temperatures)
cases = [
    ("none", [], [0, 1]),
    ("presence_penalty 1.0", ["--presence-penalty", "1.0"], [0, 1]),
    ("frequency_penalty 0.7", ["--frequency-penalty", "0.7"], [0, 1]),
    ("repetition_penalty 1.3", ["--repetition-penalty", "1.3"], [0, 1]),
    ("top_p 0.8", ["--top-p", "0.8"], [1]),
    ("logit_bias 'e' (101) +5", ["--logit-bias", "101=5"], [0, 1]),
]
rules = ["draft", "root-draw"]

def run(prompt, seed, rule, temperature, flags, processed):
    cmd = [gen, "--target", target, "--drafter", drafter, "--prompt-ids", prompt,
           "--max-new-tokens", str(tokens), "--rule", rule, "--verifier", "residual", "--budget", "8",
           "--temperature", str(temperature), "--seed", str(seed), "--ignore-eos", "--json"] + pool + flags
    if not processed:
        cmd.append("--drafter-unprocessed")
    j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return j["tokens"], sum(r["accepted"] for r in j["rounds"]), len(j["rounds"])

print(f"{len(prompts)} prompts x {tokens} tokens, pool top-k 2 / depth 7 / expand 1, residual, B = 8")
print()
print("| parameters | T | rule | mean accepted, unprocessed | processed | change | same tokens |")
print("|---|---|---|---|---|---|---|")
for name, flags, temperatures in cases:
    for temperature in temperatures:
        for rule in rules:
            total = {False: [0, 0], True: [0, 0]}
            same = True
            for i, prompt in enumerate(prompts):
                out = {}
                for processed in (False, True):
                    toks, accepted, rounds = run(prompt, i + 1, rule, temperature, flags, processed)
                    out[processed] = toks
                    total[processed][0] += accepted
                    total[processed][1] += rounds
                same = same and out[False] == out[True]
            off = total[False][0] / total[False][1]
            on = total[True][0] / total[True][1]
            same_text = ("yes" if same else "NO") if temperature == 0 else "-"
            print(f"| {name} | {temperature} | {rule} | {off:.3f} | {on:.3f} | {100 * (on / off - 1):+.1f}% | {same_text} |",
                  flush=True)
EOF
