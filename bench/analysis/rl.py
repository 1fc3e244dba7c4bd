import json,sys
f=sys.argv[1]; out=[]
for l in open(f):
    r=json.loads(l)
    if r['temperature']!=1.0 or r['decoder']!='auto': continue
    c='S' if 'verify' in r['stage_ms'] else 'a'
    if r['round']==0: out.append('|')
    out.append(c)
s=''.join(out)
# run-length
import itertools
print(' '.join(f'{k}{len(list(g))}' if k!='|' else '|' for k,g in itertools.groupby(s))[:3000])
