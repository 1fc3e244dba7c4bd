# Where an all-speculative auto request's time goes beyond its steady rounds (traces at /tmp/final11-N): its first five rounds
# beyond five steady ones, stalls beyond 3x the steady mean, and time outside the rounds' stages (prefill, gaps), as shares.
import csv,json,glob,collections,statistics as st
for T in (0.0,1.0):
  fr_start=[];fr_stall=[];fr_out=[]
  for d in sorted(glob.glob('/tmp/final11-*')):
    rec={(r['prompt_id'],r['budget']):r for r in csv.DictReader(open(d+'/records.csv')) if r['decoder']=='auto' and float(r['temperature'])==T and r['warmup']=='0'}
    dec=collections.defaultdict(list)
    for l in open(d+'/trace.jsonl'):
        r=json.loads(l)
        if r['decoder']=='auto' and r['temperature']==T and not r.get('warmup'): dec[(r['prompt_id'],str(r['budget']))].append(r)
    for k,rs in dec.items():
        if any('verify' not in r['stage_ms'] for r in rs) or len(rs)<20: continue
        ms=[sum(v for kk,v in r['stage_ms'].items() if kk!='draft') for r in rs]
        total=float(rec[k]['seconds'])*1e3
        steady=ms[5:]; mean=st.mean(steady)
        fr_start.append((sum(ms[:5])-5*st.median(steady))/total)
        fr_stall.append(sum(max(0,m-3*mean) for m in steady)/total)
        fr_out.append((total-sum(ms))/total)
  print('T',T,'n',len(fr_start),'first 5 rounds beyond steady %.1f%%'%(100*st.mean(fr_start)),' stall excess beyond 3x mean %.1f%%'%(100*st.mean(fr_stall)),' time outside the rounds stages (prefill, gaps) %.1f%%'%(100*st.mean(fr_out)))
