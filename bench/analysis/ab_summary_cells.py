# Interleaved A/B summary: per arm and temperature, `auto` (best of its caps 4, 8, 16) against the
# best fixed (rule, B) of each run, and each cell's mean ratio to ar.
# Usage: SEEDPAT='14?' python3 bench/analysis/ab_summary_cells.py ARM... (runs at /tmp/ab11/ARM-SEED/summary.json)
import glob, os, statistics as st, sys
from cells_json import run_cells

for arm in sys.argv[1:]:
    for T in '01':
        runs = [run_cells(f) for f in sorted(glob.glob(f"/tmp/ab11/{arm}-{os.environ.get('SEEDPAT', '*')}/summary.json"))]
        vs, within, thr, ratios = [], 0, 0, {}
        for r in runs:
            ar = r[('ar', T, '-')]
            best_fixed = max(v for k, v in r.items() if k[1] == T and k[0] != 'auto')
            best = max(r[('auto', T, b)] for b in ('4', '8', '16'))
            vs.append(100 * (best / best_fixed - 1))
            within += best >= 0.97 * best_fixed
            thr += best / ar >= (1.35 if T == '0' else 1.0)
            for k, v in r.items():
                if k[1] == T: ratios.setdefault(k, []).append(v / ar)
        n = len(runs)
        print(f'{arm} T={T} n={n} auto best cap vs best fixed mean {st.mean(vs):+.2f}  within3% {within}/{n}  thr {thr}/{n}  ',
              ' '.join(f'{x:+.1f}' for x in vs))
        keys = [('auto', '4'), ('auto', '8'), ('auto', '16'), ('root-draw', '4'), ('root-draw', '8'), ('draft', '4'), ('draft', '8')]
        print(f'{arm} T={T} cells:', ' '.join(f'{d[:2]}{b} {st.mean(ratios[(d, T, b)]):.3f}' for d, b in keys))
