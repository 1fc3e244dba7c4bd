import json,sys,collections,glob
for f in sorted(glob.glob('/tmp/final10-*/trace.jsonl'), key=lambda s:int(s.split('-')[1].split('/')[0])):
    prev_spec=None; k=-1000; prevkey=None; tries=0; stalled=0; cur=False
    for l in open(f):
        r=json.loads(l)
        if r['temperature']!=1.0 or r['decoder']!='auto': continue
        st=r['stage_ms']; ms=sum(v for kk,v in st.items() if kk!='draft'); spec='verify' in st
        key=(r['prompt_id'],r['budget'])
        if key!=prevkey: prevkey=key; k=-1000; prev_spec=None
        if spec:
            if prev_spec is False: k=0; tries+=1; cur=False
            if 5<=k<=10 and ms>1.5 and not cur: stalled+=1; cur=True
            k+=1
        else: k=-1000
        prev_spec=spec
    print(f.split('/')[2], 'tries',tries,'with a stalled measured round',stalled)
