import json, sys, statistics as st, collections
print('Pool wait (ms) of root-draw against root-draw+ahead (the drafter drafts ahead), T = 0, rounds after a request\'s first, warm-up prompts left out;')
print('from the traces of runs 1-8 of session 8 of the auto tuning (commit eb045ab; folder removed, in git history), 2-core AMD EPYC VM (Zen 5, family 26), AVX-512.')
print('run  B   root-draw: mean wait   +ahead: mean wait')
allv=collections.defaultdict(list)
for s in range(1,9):
    w=collections.defaultdict(list)
    for line in open('/tmp/f8-%d/trace.jsonl'%s):
        e=json.loads(line)
        if e.get('warmup') or e['temperature']!=0.0 or e['round']==0 or e['decoder'] not in ('root-draw','root-draw+ahead'): continue
        if 'pool_wait' in e['stage_ms']: w[(e['decoder'],e['budget'])].append(e['stage_ms']['pool_wait'])
    for b in (4,8,16):
        a=st.mean(w[('root-draw',b)]); c=st.mean(w[('root-draw+ahead',b)])
        allv[b].append((a,c))
        print('%d  %2d  %.3f                  %.3f'%(s,b,a,c))
for b,v in allv.items(): print('B = %d: root-draw %.3f-%.3f, +ahead %.3f-%.3f'%(b,min(x[0] for x in v),max(x[0] for x in v),min(x[1] for x in v),max(x[1] for x in v)))
