"""Why `auto` decoded plainly at T = 1: python3 plain_causes.py TRACE.jsonl...

auto's state at a temperature is shared by its requests, so its T = 1 rounds are taken in run
order (all caps, warm-up included) as one sequence of speculative and plain stretches. A plain
stretch of exactly 13 rounds between speculative ones is a refresh of ar's time (5 settling, 8
measured); any other plain stretch follows speculation that lost: a try (a speculative stretch
that began after a plain one) of at most 29 rounds (5 catching up, 24 measured), or speculation
under way. Prints the share of rounds in each kind of plain stretch, by what ended the
speculation before it."""
import collections
import json
import sys

for path in sys.argv[1:]:
    seq = []
    for line in open(path):
        r = json.loads(line)
        if r['decoder'] == 'auto' and r['temperature'] == 1.0:
            seq.append('verify' in r['stage_ms'] or 'draft' in r['stage_ms'])
    stretches = []  # [speculative?, length]
    for s in seq:
        if stretches and stretches[-1][0] == s:
            stretches[-1][1] += 1
        else:
            stretches.append([s, 1])
    plain = collections.Counter()
    tries = collections.Counter()
    for i, (spec, n) in enumerate(stretches):
        if spec:
            if i > 0 and not (stretches[i - 1][1] == 13 and i > 1):
                tries['won' if n > 29 else 'lost'] += 1
            continue
        if i == 0:
            plain['before any speculation'] += n
        elif n == 13 and i + 1 < len(stretches):
            plain['refresh of ar'] += n
        else:
            before = stretches[i - 1][1]
            after_plain = i >= 2 and not stretches[i - 2][0] and stretches[i - 2][1] != 13
            plain['after a lost try' if after_plain and before <= 29 else 'after speculation under way lost'] += n
    total = len(seq)
    print(path, f'{total} rounds, speculative {sum(n for s, n in stretches if s) / total:.2f};',
          ', '.join(f'{k} {v / total:.2f}' for k, v in plain.most_common()), '; tries', dict(tries))
