#!/usr/bin/env python3
"""The GPU goals, read off a GPU check's results (device-check.sh writes them into OUT).

Prints one line per goal: the measured figure, the goal, and met / NOT MET / not run. A goal whose
step did not run (or wrote nothing) is reported as not run, never as met.

    bench/gpu/goals.py OUT
"""
import json
import os
import sys

out = sys.argv[1]


def load(*names):
    for name in names:
        path = os.path.join(out, name)
        if os.path.exists(path):
            try:
                with open(path) as f:
                    return json.load(f)
            except ValueError:
                return None
    return None


def verdict(ok):
    return "met" if ok else "NOT MET"


def gtest_result(report, test):
    """'passed', 'failed', 'skipped' or None (not in the report) for Suite.Name `test`."""
    if not report:
        return None
    suite_name, name = test.split(".", 1)
    for suite in report.get("testsuites", []):
        if suite.get("name") != suite_name:
            continue
        for t in suite.get("testsuite", []):
            if t.get("name") == name:
                if t.get("failures"):
                    return "failed"
                return "skipped" if t.get("result") == "SKIPPED" else "passed"
    return None


lines = []
passes = load("passes.json") or []
by_shape = {(p.get("preset"), p.get("context")): p for p in passes}


def pass_at(preset, context):
    return by_shape.get((preset, context))


# The 8B shape's 1-token pass within 1.10x of its HBM floor; a 64-row tree pass within
# 1.15x of the 1-row pass at contexts 512 and 4 096; attention at most 10% of that pass at 4 096.
for context in (512, 2048, 4096):
    p = pass_at("llama-3.1-8b", context)
    if p:
        r = p["root_over_hbm_floor"]
        lines.append(f"1-token pass, 8B shape, context {context}: {r:.2f}x the HBM floor (goal <= 1.10x): "
                     f"{verdict(r <= 1.10)}")
    else:
        lines.append(f"1-token pass, 8B shape, context {context} (goal <= 1.10x the HBM floor): not run")
for context in (512, 4096):
    p = pass_at("llama-3.1-8b", context)
    if p:
        r = p["tree64_over_root"]
        lines.append(f"64-row tree pass, 8B shape, context {context}: {r:.2f}x the 1-row pass (goal <= 1.15x): "
                     f"{verdict(r <= 1.15)}")
    else:
        lines.append(f"64-row tree pass, 8B shape, context {context} (goal <= 1.15x the 1-row pass): not run")
timing = load("kernel-timing.json") or {}
p = pass_at("llama-3.1-8b", 4096)
attention = [t for t in timing.get("tree_attention", []) if t.get("shape") == "llama-3.1-8b"
             and t.get("dtype") == "bfloat16" and t.get("rows") == 64 and t.get("kernel") == "tensor-core"]
if p and attention and timing.get("context") == 4096:
    layers = 32  # Llama-3.1-8B
    share = layers * attention[0]["graph_us"] / p["graph_rows_on_device_wall_us"]["64"]
    lines.append(f"attention's share of a 64-row pass, 8B shape, context 4096: {share:.1%} (goal <= 10%): "
                 f"{verdict(share <= 0.10)}")
else:
    lines.append("attention's share of a 64-row pass, 8B shape, context 4096 (goal <= 10%): not run")
# The 1-B shape's tree pass (the looser goal it was set first).
p = pass_at("llama-3.2-1b", 512)
if p:
    r = p["tree64_over_root"]
    lines.append(f"64-row tree pass, llama-3.2-1b, context 512: {r:.2f}x the 1-row pass (goal <= 1.25x): "
                 f"{verdict(r <= 1.25)}")
else:
    lines.append("64-row tree pass, llama-3.2-1b (goal <= 1.25x the 1-row pass): not run")
tokens = load("tokens.json")
if tokens and "root-draw" in tokens.get("decoders", {}):
    h = tokens["decoders"]["root-draw"]["host_us_per_round"]
    lines.append(f"host time per round outside GPU work (root-draw): {h:.1f} us (goal <= 100 us): {verdict(h <= 100)}")
else:
    lines.append("host time per round outside GPU work (goal <= 100 us): not run")
one_process = gtest_result(load("backend-tests.json"), "CudaBackend.GreedyEveryRuleAndBudgetEqualsArOnOneGpu")
daemons = gtest_result(load("daemon-identity.json"),
                       "Daemon.GreedyOutputEqualsPlainDecodingForEveryRuleBudgetVerifier")
for what, result in (("one process, generate()", one_process), ("the daemon pair on cuda:0", daemons)):
    lines.append(f"greedy identity of every rule and budget, {what}: "
                 + ("not run" if result is None else verdict(result == "passed") + f" ({result})"))
hf = load("hf-compare.json", os.path.join("hf", "hf-compare.json"))
for model in ("llama", "qwen3"):
    entry = (hf or {}).get(model)
    if not entry:
        lines.append(f"logits vs transformers, {model}: not run")
    elif "error" in entry:
        lines.append(f"logits vs transformers, {model}: NOT MET ({entry['error']})")
    else:
        for dtype in ("float32", "bfloat16"):
            e = entry.get(dtype)
            if e:
                lines.append(f"logits vs transformers, {model} {dtype}: max diff {e['max_abs_diff']:.3g} "
                             f"(tolerance {e['tolerance']:.3g}): {verdict(e['ok'])}")
print("\n".join(lines))
