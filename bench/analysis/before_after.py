"""Two builds, alternating runs with the same seeds: python3 bench/analysis/before_after.py DIR SEED...
Reads DIR/before-SEED/ and DIR/after-SEED/ (each a `rootspec-bench --out`). Prints each run's
speed ratio to `ar` per (decoder, T, B) with its 95% interval, `ar`'s tokens/s, and whether the
two builds decoded alike: every decode of a decoder other than `auto` (whose choices follow
wall-clock timing) with the same tokens, rounds and accepted-token histogram in both."""
import csv
import json
import sys

d, seeds = sys.argv[1], sys.argv[2:]


def cells(run):
    s = json.load(open(f'{d}/{run}/summary.json'))
    out = {}
    for e in s['entries']:
        key = (e['decoder'], e['temperature'], e['budget'])
        if e['decoder'] == 'ar':
            out[key] = f"ar {e['tokens_per_s']['value']:.0f} tok/s"
        else:
            g = e['gain_over_ar']
            out[key] = f"{100 * g['value']:+.1f}% [{100 * g['lo']:+.1f}, {100 * g['hi']:+.1f}]"
    return out


def decodes(run):
    rows = csv.DictReader(open(f'{d}/{run}/records.csv'))
    return {(r['prompt_id'], r['decoder'], r['temperature'], r['budget'], r['warmup']):
            (r['tokens'], r['rounds'], r['accepted_hist']) for r in rows if r['decoder'] != 'auto'}


keys = None
for seed in seeds:
    for arm in ('before', 'after'):
        c = cells(f'{arm}-{seed}')
        keys = keys or sorted(c, key=lambda k: (k[1], k[0] != 'ar', k[0]))
        print(f'{arm}-{seed}: ' + ' | '.join(f'{k[0]} T{k[1]:g}: {c[k]}' for k in keys))
    a, b = decodes(f'before-{seed}'), decodes(f'after-{seed}')
    same = sum(a[k] == b.get(k) for k in a)
    print(f'seed {seed}: {same} of {len(a)} decodes (auto aside) alike in both builds')
