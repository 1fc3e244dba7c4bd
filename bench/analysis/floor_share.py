"""`auto`'s long plain stretches at T = 1: python3 floor_share.py TRACE.jsonl... (rootspec-bench --trace).
auto's state at a temperature is shared by its requests, so its T = 1 rounds are taken in run order
as one sequence of speculative and plain stretches. Prints the speculative share of them and each
plain stretch of over 300 rounds (the gap between tries grown long, or the floor after tries lost in
a row) as (rounds, won share of the tries before it, lost tries in a row): the share a running mean
over ~16 tries as Acceptance::won_share. Tries as plain_causes.py (beside this script)
counts them: a speculative stretch after a plain one that is not a refresh of ar's time (13
rounds); won if it ran over 29 rounds (a try spanning two requests miscounts)."""
import json
import sys

tot_long = tot_gated = tot = 0
for path in sys.argv[1:]:
    stretches = []  # [speculative?, rounds]
    for line in open(path):
        r = json.loads(line)
        if r['decoder'] != 'auto' or r['temperature'] != 1.0:
            continue
        spec = 'verify' in r['stage_ms'] or 'draft' in r['stage_ms']
        if stretches and stretches[-1][0] == spec:
            stretches[-1][1] += 1
        else:
            stretches.append([spec, 1])
    share, tries, row, longs = 0.0, 0, 0, []
    for i, (spec, k) in enumerate(stretches):
        if spec:
            if i > 0 and not (stretches[i - 1][1] == 13 and i > 1):
                won = k > 29
                tries += 1
                share += max(1 / 16, 1 / tries) * (won - share)
                row = 0 if won else row + 1
            elif k >= 64:
                row = 0
        elif k > 300:
            longs.append((k, round(share, 2), row))
    rounds = sum(k for s, k in stretches)
    speculative = sum(k for s, k in stretches if s)
    long_rounds = sum(k for k, s, r in longs)
    gated = sum(k for k, s, r in longs if s >= 1 / 3)
    tot_long, tot_gated, tot = tot_long + long_rounds, tot_gated + gated, tot + rounds
    print(path, f'{rounds} rounds, speculative {speculative / rounds:.2f}; plain stretches of over 300:',
          f'{long_rounds} rounds ({long_rounds / rounds:.2f}), {gated} of them after a won share >= 1/3', longs)
print(f'all: {tot} T = 1 rounds, {tot_long} in plain stretches of over 300, {tot_gated} of them after a won share >= 1/3')
