import json,sys,collections,statistics as st
# within auto T=1 decodes: positions in plain stretches that follow speculation (refresh or switch), and
# speculative rounds after such stretches
pa=collections.defaultdict(list); ps=collections.defaultdict(list); steady_s=[]; steady_a=[]
for f in sys.argv[1:]:
  rs=[json.loads(l) for l in open(f)]
  dec=collections.OrderedDict()
  for r in rs:
    if r['temperature']==1.0 and r['decoder']=='auto' and not r.get('warmup'): dec.setdefault((r['prompt_id'],r['budget']),[]).append(r)
  for k,v in dec.items():
    modes=['S' if 'verify' in r['stage_ms'] else 'a' for r in v]
    ms=[sum(x for kk,x in r['stage_ms'].items() if kk!='draft') for r in v]
    tok=[r['accepted']+1 if m=='S' else 1 for r,m in zip(v,modes)]
    i=0
    while i<len(v):
      j=i
      while j<len(v) and modes[j]==modes[i]: j+=1
      L=j-i
      prev = modes[i-1] if i>0 else None
      for p in range(L):
        if modes[i]=='a' and prev=='S': pa[min(p,14)].append(ms[i+p])
        if modes[i]=='S' and prev=='a': ps[min(p,14)].append((ms[i+p],tok[i+p]))
        if modes[i]=='S' and prev is None and p>=10: steady_s.append((ms[i+p],tok[i+p]))
        if modes[i]=='a' and p>=10 and L>100: steady_a.append(ms[i+p])
      i=j
print('steady ar ms %.3f (n %d)'%(st.mean(steady_a),len(steady_a)), ' steady spec ms/tok %.3f (n %d)'%(sum(m for m,_ in steady_s)/sum(t for _,t in steady_s),len(steady_s)))
print('plain after spec, by position:', ' '.join('%d:%.3f'%(p,st.mean(pa[p])) for p in sorted(pa)))
print('spec after plain, by position ms/tok:', ' '.join('%d:%.3f'%(p,sum(m for m,_ in ps[p])/sum(t for _,t in ps[p])) for p in sorted(ps)))
