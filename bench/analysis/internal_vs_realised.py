# auto's own view of speculation against ar (its speculative rate over ar's, as its debug line gives
# them at a request's end) against what the request realised (its tokens/s over ar's on the same
# prompt in the same run), for requests that speculated throughout. Run inside the results folder.
import csv, re, statistics as st, collections

out = collections.defaultdict(list)
for n in range(1, 17):
    rec = list(csv.DictReader(open(f'final-run-{n}.records.csv')))
    autos = [r for r in rec if r['decoder'] == 'auto']
    logs = open(f'final-run-{n}.auto-requests.log').read().splitlines()
    assert len(logs) == len(autos), n  # one debug line per auto request, in the harness's order
    ar = {(r['prompt_id'], r['temperature']): float(r['tokens_per_s']) for r in rec if r['decoder'] == 'ar' and r['warmup'] == '0'}
    for r, line in zip(autos, logs):
        m = re.search(r'auto ran (\d+) speculative and (\d+) plain rounds; at T = (\d): ([\d.]+) tokens in ([\d.]+) ms '
                      r'a speculative round.*?, ([\d.]+) ms a plain one', line)
        spec, plain, T = int(m[1]), int(m[2]), m[3]
        if r['warmup'] == '1' or T != r['temperature'] or plain > 0 or spec <= 20: continue
        internal = float(m[4]) / float(m[5]) * float(m[6])
        out[T].append((internal, float(r['tokens_per_s']) / ar[(r['prompt_id'], T)]))
for T, v in sorted(out.items()):
    print(f'T = {T}: {len(v)} requests that speculated throughout; auto\'s speculative rate over ar\'s '
          f'{st.mean(i for i, _ in v):.3f}, realised over ar on the same prompt {st.mean(x for _, x in v):.3f}')
