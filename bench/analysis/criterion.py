"""`auto`'s criteria over harness runs: python3 criterion.py RUN_DIR_OR_SUMMARY...

Per run and temperature: ar's tokens/s, the best fixed (rule, B) over ar, `auto` at each cap
over ar, and `auto` at its best cap against the best fixed. Then, over the runs: how often
`auto` (best cap, and each cap) is >= 1.35x (T = 0) / 1.0x (T = 1) ar and within 3% of the best
fixed, how often each fixed cell is within 3% of the best fixed, the mean ratio to ar of each,
and the mean half-width of the cells' 95% intervals over ar (the run's noise)."""
import json
import os
import statistics as st
import sys

CAPS = ('4', '8', '16')


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, 'summary.json')
    j = json.load(open(path))
    cells, half = {}, {}
    for e in j['entries']:
        key = (e['decoder'], str(int(e['temperature'])), str(e['budget']) if e['budget'] > 0 else '-')
        cells[key] = e['tokens_per_s']['value']
        g = e.get('gain_over_ar')
        if g:
            half[key] = (g['hi'] - g['lo']) / 2
    return os.path.basename(os.path.dirname(path)) or path, j['run'].get('repeats', 1), cells, half


runs = [load(p) for p in sys.argv[1:]]
for T, threshold in (('0', 1.35), ('1', 1.0)):
    print(f'T = {T}')
    within, ratio, meets, widths = {}, {}, {}, []
    for name, repeats, r, half in runs:
        ar = r[('ar', T, '-')]
        fixed = {k: v for k, v in r.items() if k[1] == T and k[0] != 'auto'}
        best_key = max(fixed, key=fixed.get)
        best = fixed[best_key]
        autos = {b: r[('auto', T, b)] for b in CAPS if ('auto', T, b) in r}
        cands = dict(fixed)
        cands[('auto (best cap)', T, '')] = max(autos.values())
        for b, v in autos.items():
            cands[('auto', T, b)] = v
        for k, v in cands.items():
            within[k] = within.get(k, 0) + (v >= 0.97 * best)
            meets[k] = meets.get(k, 0) + (v >= threshold * ar)
            ratio.setdefault(k, []).append(v / ar)
        widths += [half[k] for k in half if k[1] == T]
        auto_best = max(autos.values())
        print(f'  {name} (x{repeats}): ar {ar:.0f}/s, best fixed {best_key[0]} {best_key[2]} '
              f'{100 * (best / ar - 1):+.1f}%, auto caps ' +
              ' '.join(f'{b}:{100 * (v / ar - 1):+.1f}' for b, v in autos.items()) +
              f', auto best cap vs best fixed {100 * (auto_best / best - 1):+.1f}%')
    n = len(runs)
    print(f'  over {n} runs: cell, >= {threshold}x ar, within 3% of the best fixed, mean ratio to ar '
          f'(mean 95% half-width over ar: {100 * st.mean(widths):.1f}%)')
    for k in sorted(within, key=lambda k: -st.mean(ratio[k])):
        print(f'  {k[0]:>16} {k[2]:>3}  {meets[k]:2d}/{n}  {within[k]:2d}/{n}  {st.mean(ratio[k]):.3f}')
