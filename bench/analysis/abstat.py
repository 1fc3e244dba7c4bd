import json,sys,glob,collections
# per arm: ratios vs ar of each cell, mean over seeds
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob('./*-*/summary.json')):
    arm,seed=f.split('/')[-2].rsplit('-',1)
    s=json.load(open(f))
    ents=s['entries'] if 'entries' in s else s
    ar={}
    for e in ents:
        if e['decoder']=='ar': ar[e['temperature']]=e['tokens_per_s']['value']
    for e in ents:
        if e['decoder']=='ar': continue
        res[arm][(e['decoder'],e['temperature'],e.get('budget'))].append((int(seed),e['tokens_per_s']['value']/ar[e['temperature']]))
arms=sorted(res)
keys=sorted(set(k for a in arms for k in res[a]))
print('cell', *arms)
for k in keys:
    print(k, *['%s mean %.3f'%(' '.join('%.3f'%v for _,v in sorted(res[a][k])), sum(v for _,v in res[a][k])/max(1,len(res[a][k]))) for a in arms])
