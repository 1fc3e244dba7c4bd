"""`auto` alone against the fixed decoders, and which rule its rounds ran.

python3 bench/analysis/auto_alone_rules.py RUN_DIR...
Each RUN_DIR is a `rootspec-bench --trace --out RUN_DIR` output (summary.json, trace.jsonl). Per
run and temperature: `auto`'s tokens/s against the best of the other decoders of the run (ar and
the fixed rules), whether it is within 3% of it and not below `ar`, and how many of `auto`'s
measured rounds (warm-up left out) were plain (a), root-draw (R) and draft (D), with the longest
stretches in the order they ran.
"""
import collections
import json
import os
import sys


def kind(stage_ms):
    if 'pool_wait' not in stage_ms and 'tree_pass' not in stage_ms and 'draft' not in stage_ms:
        return 'a'
    return 'R' if 'root_pass' in stage_ms else 'D'


for run in sys.argv[1:]:
    cells = {}
    for e in json.load(open(os.path.join(run, 'summary.json')))['entries']:
        cells[(e['decoder'], e['temperature'])] = e['tokens_per_s']['value']
    rounds = collections.defaultdict(str)
    trace = os.path.join(run, 'trace.jsonl')
    if os.path.exists(trace):
        for line in open(trace):
            r = json.loads(line)
            if r['decoder'] == 'auto' and not r.get('warmup'):
                rounds[r['temperature']] += kind(r['stage_ms'])
    for T in sorted({t for _, t in cells}):
        auto = cells.get(('auto', T))
        others = {d: v for (d, t), v in cells.items() if t == T and d != 'auto'}
        if auto is None or not others:
            continue
        best = max(others, key=others.get)
        vs_best = auto / others[best] - 1
        vs_ar = auto / others['ar'] - 1 if 'ar' in others else float('nan')
        ok = vs_best >= -0.03 and vs_ar >= 0
        s = rounds.get(T, '')
        stretches = []
        for ch in s:
            if stretches and stretches[-1][0] == ch:
                stretches[-1][1] += 1
            else:
                stretches.append([ch, 1])
        counts = collections.Counter(s)
        print(f'{run} T={T:g}: auto {auto:.0f} tok/s, best other {best} {others[best]:.0f}: '
              f'{100 * vs_best:+.1f}% (vs ar {100 * vs_ar:+.1f}%) {"MET" if ok else "not met"}; '
              f'rounds a {counts["a"]} R {counts["R"]} D {counts["D"]}; '
              f'first stretches {" ".join(f"{c}{n}" for c, n in stretches[:16])}')
