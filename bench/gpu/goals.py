#!/usr/bin/env python3
"""The goals of issue 15, read off a GPU check's results (device-check.sh writes them into OUT).

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
by_preset = {p.get("preset"): p for p in passes}
eight_b = by_preset.get("llama-3.1-8b")
if eight_b:
    r = eight_b["root_over_hbm_floor"]
    lines.append(f"root pass, 8B shape: {r:.2f}x the HBM floor (goal <= 1.15x): {verdict(r <= 1.15)}")
else:
    lines.append("root pass, 8B shape vs the HBM floor (goal <= 1.15x): not run")
for preset in ("llama-3.1-8b", "llama-3.2-1b"):
    p = by_preset.get(preset)
    if p:
        r = p["tree64_over_root"]
        lines.append(f"64-row tree pass, {preset}: {r:.2f}x the 1-row pass (goal <= 1.25x): {verdict(r <= 1.25)}")
    else:
        lines.append(f"64-row tree pass, {preset} (goal <= 1.25x the 1-row pass): not run")
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
