#!/usr/bin/env python3
"""Speculation's gain over `ar` under each sampling parameter set (bench/sampling/processor_gains.sh):
one row per (parameter set, temperature, decoder): tok/s, the speedup over its own run's `ar`
(paired, with the 95% interval) and that speedup over the same decoder's without parameters."""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-out/sampling-gains")
runs = {}
for summary in sorted(out.glob("*/summary.json")):
    runs[summary.parent.name] = json.loads(summary.read_text())

def speedups(summary):
    by = {}
    for e in summary["entries"]:
        if e["decoder"] == "ar":
            continue
        g = e.get("gain_over_ar") or {}
        if not g:
            continue
        by[(e["decoder"], e["temperature"])] = (e["tokens_per_s"]["value"], 1 + g["value"], 1 + g["lo"], 1 + g["hi"],
                                                 e.get("mean_accepted", 0.0))
    return by

base = speedups(runs["none"]) if "none" in runs else {}
print("| parameters | T | decoder | tok/s | speedup over `ar` [95%] | accepted per round | speedup ÷ unprocessed speedup |")
print("|---|---|---|---|---|---|---|")
order = ["none", "json_schema", "presence", "frequency", "repetition", "logit_bias", "top_k", "top_p", "min_p", "all"]
for name in order + sorted(set(runs) - set(order)):
    if name not in runs:
        continue
    run = runs[name]["run"]
    sampling = run.get("sampling", "") or (run.get("constraint", "none") if run.get("constraint") != "none" else "none")
    for (decoder, t), (tps, s, lo, hi, acc) in sorted(speedups(runs[name]).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ref = base.get((decoder, t))
        rel = f"{s / ref[1]:.2f}" if ref and name != "none" else "—"
        print(f"| `{sampling}` | {t:g} | {decoder} | {tps:.0f} | {s:.2f}× [{lo:.2f}, {hi:.2f}] | {acc:.2f} | {rel} |")
