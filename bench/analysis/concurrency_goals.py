#!/usr/bin/env python3
"""The batching goals from two rootspec-bench --concurrency runs of one machine:
BATCH_ONE: concurrency 1 with target.max_batch = 1 (the batch-one decoders);
BATCHED:   concurrency 1,2,4,8,16 with target.max_batch = 16.
  1. aggregate tokens/s at 8 concurrent >= 2.5x the best batch-one decoder's, and for the decoder
     that reaches it, p50 time per output token <= 2x its own at concurrency 1 (batch one);
  2. `auto` within 3% of the best of (ar and every fixed rule) at every concurrency and T, and
     never below batched ar.
Usage: concurrency_goals.py BATCH_ONE/concurrency.csv BATCHED/concurrency.csv"""
import csv
import sys


def rows(path):
    with open(path) as f:
        return [dict(r, concurrency=int(r["concurrency"]), temperature=float(r["temperature"]),
                     aggregate=float(r["aggregate_tokens_per_s"]), tpot=float(r["tpot_ms_p50"]))
                for r in csv.DictReader(f)]


def name(r):
    return r["decoder"] + ("" if r["budget"] == "0" else " B=" + r["budget"]) + f" T={r['temperature']:g}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    one, batched = rows(sys.argv[1]), rows(sys.argv[2])
    ok = True
    for t in sorted({r["temperature"] for r in batched}):
        best_one = max((r for r in one if r["temperature"] == t), key=lambda r: r["aggregate"])
        at8 = [r for r in batched if r["concurrency"] == 8 and r["temperature"] == t]
        if not at8:
            print(f"T={t:g}: goal 1 not run (no concurrency 8)")
            continue
        top = max(at8, key=lambda r: r["aggregate"])
        ratio = top["aggregate"] / best_one["aggregate"]
        own = [r for r in one if r["decoder"] == top["decoder"] and r["budget"] == top["budget"]
               and r["temperature"] == t]
        tpot_ratio = top["tpot"] / own[0]["tpot"] if own else float("nan")
        met = ratio >= 2.5 and tpot_ratio <= 2.0
        ok &= met
        print(f"T={t:g}: goal 1 {'met' if met else 'NOT MET'}: at 8 concurrent {name(top)} "
              f"{top['aggregate']:.0f} tokens/s = {ratio:.2f}x the best batch-one decoder "
              f"({name(best_one)}, {best_one['aggregate']:.0f}); its p50 TPOT {top['tpot']:.3f} ms = "
              f"{tpot_ratio:.2f}x its own at batch one")
    for c in sorted({r["concurrency"] for r in batched}):
        for t in sorted({r["temperature"] for r in batched}):
            cell = [r for r in batched if r["concurrency"] == c and r["temperature"] == t]
            auto = [r for r in cell if r["decoder"] == "auto"]
            others = [r for r in cell if r["decoder"] != "auto"]
            ar = [r for r in cell if r["decoder"] == "ar"]
            if not auto or not others:
                continue
            best = max(others, key=lambda r: r["aggregate"])
            gap = auto[0]["aggregate"] / best["aggregate"] - 1
            below_ar = ar and auto[0]["aggregate"] < ar[0]["aggregate"]
            met = gap >= -0.03 and not below_ar
            ok &= met
            print(f"c={c:2d} T={t:g}: goal 2 {'met' if met else 'NOT MET'}: auto {auto[0]['aggregate']:.0f} "
                  f"tokens/s, {gap * 100:+.1f}% against the best other ({name(best)}, {best['aggregate']:.0f})"
                  + (f"; below batched ar ({ar[0]['aggregate']:.0f})" if below_ar else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
