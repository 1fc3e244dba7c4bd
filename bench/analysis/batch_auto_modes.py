"""What `auto`'s rounds ran at each concurrency: plain, root-draw or draft.

python3 bench/analysis/batch_auto_modes.py RUN_DIR
RUN_DIR is a `rootspec-bench --concurrency … --trace --out RUN_DIR` output (concurrency.csv,
trace.jsonl). Per level and temperature: `auto`'s aggregate tokens/s against the best other
decoder of the level, then the share of its measured rounds (warm-up left out) that were plain
(a), root-draw (R) and draft (D), the tokens each emitted a round, and the mean batch its rounds
ran in. A round's kind comes from its stages, as in auto_alone_rules.py: no pool, plain; a pool
after a root pass, root-draw; a pool without one, draft.
"""
import collections
import csv
import json
import os
import sys


def kind(stage_ms):
    if 'pool_wait' not in stage_ms and 'tree_pass' not in stage_ms and 'draft' not in stage_ms:
        return 'a'
    return 'R' if 'root_pass' in stage_ms else 'D'


run = sys.argv[1]
aggregate = {}
with open(os.path.join(run, 'concurrency.csv')) as f:
    for row in csv.DictReader(f):
        aggregate[(int(row['concurrency']), row['decoder'], float(row['temperature']))] = float(
            row['aggregate_tokens_per_s'])
rounds = collections.defaultdict(lambda: collections.Counter())  # (level, T) -> kind -> rounds
tokens = collections.defaultdict(lambda: collections.Counter())  # …-> tokens
batch = collections.defaultdict(list)
for line in open(os.path.join(run, 'trace.jsonl')):
    r = json.loads(line)
    decoder, _, level = r['decoder'].partition('@c')
    if decoder != 'auto' or r.get('warmup') or not level:
        continue
    key = (int(level), float(r['temperature']))
    k = kind(r['stage_ms'])
    rounds[key][k] += 1
    tokens[key][k] += r['accepted'] + 1
    batch[key].append(r.get('batch', 1))
print('level  T    auto/best  auto/ar   plain  root-draw  draft   tokens a round (a/R/D)   mean batch')
for key in sorted(rounds):
    level, T = key
    others = {d: v for (c, d, t), v in aggregate.items() if c == level and t == T and d != 'auto'}
    auto = aggregate.get((level, 'auto', T), 0)
    best = max(others.values()) if others else 0
    n = sum(rounds[key].values())
    share = {k: 100.0 * rounds[key][k] / n for k in 'aRD'}
    per = {k: tokens[key][k] / rounds[key][k] if rounds[key][k] else 0 for k in 'aRD'}
    print('%5d  %-3g  %8.3f  %8.3f  %5.1f%%  %8.1f%%  %5.1f%%   %4.2f / %4.2f / %4.2f        %5.2f' %
          (level, T, auto / best if best else 0, auto / others.get('ar', 0) if others.get('ar') else 0,
           share['a'], share['R'], share['D'], per['a'], per['R'], per['D'],
           sum(batch[key]) / len(batch[key])))
