"""Interleaved A/B of two arms: python3 ab_summary.py DIR ARM_A ARM_B SEED... (PREFIX=ab, TEMPS=0,1)
Reads DIR/PREFIX-ARM-SEED/summary.json and DIR/PREFIX-ARM-SEED.auto-requests.log. Per temperature and
arm: `auto` at each cap over `ar` (mean over seeds), `auto` at its best cap against the best fixed
(rule, B) of its run (mean, and how often within 3%), ≥ 1.35x / 1.0x `ar`, and the share of
`auto`'s rounds that speculated."""
import json
import os
import re
import statistics as st
import sys

d, arms, seeds = sys.argv[1], sys.argv[2:4], sys.argv[4:]
prefix = os.environ.get('PREFIX', 'ab')
temps = [float(t) for t in os.environ.get('TEMPS', '0,1').split(',')]


def cells(path):
    out = {}
    for e in json.load(open(path))['entries']:
        out[(e['decoder'], e['temperature'], e['budget'])] = e['tokens_per_s']['value']
    return out


def spec_share(path):
    spec, plain = {}, {}
    for line in open(path):
        m = re.search(r'auto ran (\d+) speculative and (\d+) plain rounds; at T = ([\d.]+)', line)
        if m:
            spec[float(m[3])] = spec.get(float(m[3]), 0) + int(m[1])
            plain[float(m[3])] = plain.get(float(m[3]), 0) + int(m[2])
    return {t: spec[t] / max(1, spec[t] + plain[t]) for t in spec}


for T in temps:
    thr = 1.35 if T == 0 else 1.0
    for arm in arms:
        caps, vs_best, within, meets, share = {}, [], 0, 0, []
        for s in seeds:
            c = cells(f'{d}/{prefix}-{arm}-{s}/summary.json')
            ar = c[('ar', T, 0)]
            fixed = max(v for k, v in c.items() if k[1] == T and k[0] != 'auto')
            autos = {k[2]: v for k, v in c.items() if k[1] == T and k[0] == 'auto'}
            for b, v in autos.items():
                caps.setdefault(b, []).append(v / ar)
            best = max(autos.values())
            vs_best.append(best / fixed - 1)
            within += best >= 0.97 * fixed
            meets += best >= thr * ar
            share.append(spec_share(f'{d}/{prefix}-{arm}-{s}.auto-requests.log').get(T, 0.0))
        n = len(seeds)
        print(f'T = {T:g} {arm:>5}: auto/ar by cap ' +
              ' '.join(f'{b}:{st.mean(v):.3f}' for b, v in sorted(caps.items())) +
              f'; best cap vs best fixed {100 * st.mean(vs_best):+.2f}% (within 3% {within}/{n}, '
              f'>= {thr}x ar {meets}/{n}); speculative share of rounds {st.mean(share):.2f}')
