import csv,json,collections,statistics as st,sys,glob
agg=collections.defaultdict(list)
for d in sorted(glob.glob('/tmp/final11-*')):
  rec=list(csv.DictReader(open(d+'/records.csv')))
  tr=collections.defaultdict(lambda:[0,0])
  for l in open(d+'/trace.jsonl'):
    r=json.loads(l)
    k=(r['prompt_id'],r['decoder'],r['budget'],bool(r.get('warmup')),r['temperature'])
    tr[k][0 if 'verify' in r['stage_ms'] else 1]+=1
  for T in ('0','1'):
    ar={r['prompt_id']:float(r['tokens_per_s']) for r in rec if r['decoder']=='ar' and r['temperature']==T and r['warmup']=='0'}
    for r in rec:
      if r['decoder']!='auto' or r['temperature']!=T or r['warmup']=='1': continue
      s,a=tr[(r['prompt_id'],'auto',int(r['budget']),False,float(T))]
      kind='spec' if a==0 else 'plain' if s==0 else 'mixed'
      agg[(T,kind)].append(float(r['tokens_per_s'])/ar[r['prompt_id']])
for k in sorted(agg): v=agg[k]; print(k,len(v),'mean %.3f sd %.3f se %.4f'%(st.mean(v),st.stdev(v),st.stdev(v)/len(v)**.5))
