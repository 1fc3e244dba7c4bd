import json,gzip,sys,collections
agg=collections.defaultdict(lambda: collections.defaultdict(list))
for l in (gzip.open(sys.argv[1],"rt") if sys.argv[1].endswith(".gz") else open(sys.argv[1])):
    d=json.loads(l)
    if d.get('warmup'): continue
    k=(d['decoder'],d['temperature'],d['budget'])
    for s,v in d['stage_ms'].items(): agg[k][s].append(v)
    agg[k]['_acc'].append(d['accepted']); agg[k]['_tree'].append(d['tree_size'])
for k in sorted(agg):
    if k[1]!=1.0 and k[0]!='ar': continue
    a=agg[k]; n=len(a['_acc'])
    print(k, 'rounds',n, ' '.join('%s %.3f'%(s,sum(v)/n) for s,v in sorted(a.items())))
