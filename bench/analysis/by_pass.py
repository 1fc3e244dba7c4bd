"""`auto`'s criteria on each pass of --repeats runs alone, against all passes together:
python3 by_pass.py final-run-1.records.csv[.gz] ...

records.csv holds a run's decodes in run order, so the k-th timed decode of a (prompt,
combination) is pass k. A cell's speed is summed tokens over summed seconds (as the harness's).
Prints, per temperature, how often `auto` at its best cap is >= 1.35x / 1.0x ar and within 3% of
the best fixed (rule, B), and the same for the best fixed choice on average: with one pass (each
pass of each run counted apart: 24 prompts, one decode each, as a one-pass run) and with all
passes of a run together."""
import csv
import gzip
import statistics as st
import sys
from collections import defaultdict

CAPS = ('4', '8', '16')


def cells_by_pass(path):
    seen = defaultdict(int)
    tok = defaultdict(float)
    sec = defaultdict(float)
    passes = 0
    for r in csv.DictReader(gzip.open(path, 'rt') if path.endswith('.gz') else open(path)):
        if r['warmup'] == '1':
            continue
        b = r['budget'] if r['budget'] != '0' else '-'
        cell = (r['decoder'], str(int(float(r['temperature']))), b)
        q = seen[(r['prompt_id'], cell)]
        seen[(r['prompt_id'], cell)] += 1
        passes = max(passes, q + 1)
        for key in ((q, cell), ('all', cell)):
            tok[key] += float(r['tokens'])
            sec[key] += float(r['seconds'])
    out = defaultdict(dict)
    for (q, cell), t in tok.items():
        out[q][cell] = t / sec[(q, cell)]
    return [out[q] for q in range(passes)], out['all']


def judge(r, T, threshold):
    ar = r[('ar', T, '-')]
    fixed = {k: v for k, v in r.items() if k[1] == T and k[0] != 'auto'}
    best = max(fixed.values())
    auto = max(r[('auto', T, b)] for b in CAPS)
    return auto >= threshold * ar, auto >= 0.97 * best, auto / ar, best / ar, fixed, ar


single, whole = [], []
for path in sys.argv[1:]:
    passes, together = cells_by_pass(path)
    single += passes
    whole.append(together)
for T, threshold in (('0', 1.35), ('1', 1.0)):
    for name, runs in (('one pass', single), ('all passes', whole)):
        res = [judge(r, T, threshold) for r in runs]
        fixed_mean = defaultdict(list)
        for *_, fixed, ar in res:
            for k, v in fixed.items():
                fixed_mean[k].append(v / ar)
        top = max(fixed_mean, key=lambda k: st.mean(fixed_mean[k]))
        top_within = sum(r[4][top] >= 0.97 * max(r[4].values()) for r in res)
        n = len(res)
        print(f'T = {T}, {name} ({n}): auto best cap >= {threshold}x ar {sum(x[0] for x in res)}/{n}, '
              f'within 3% of the best fixed {sum(x[1] for x in res)}/{n}; auto/ar {min(x[2] for x in res):.3f}-'
              f'{max(x[2] for x in res):.3f} mean {st.mean(x[2] for x in res):.3f}; best fixed on average '
              f'{top[0]} {top[2]} (mean {st.mean(fixed_mean[top]):.3f}) within 3% of its run\'s best fixed {top_within}/{n}')
