import json,sys,collections,glob
pos=collections.Counter(); posn=collections.Counter(); rd=[0,0]; ar=[0,0]
TH=float(sys.argv[1]) if len(sys.argv)>1 else 1.5
for f in sorted(glob.glob('/tmp/final10-*/trace.jsonl')):
    prev_spec=False; k=0; prevkey=None
    for l in open(f):
        r=json.loads(l)
        if r['temperature']!=1.0: continue
        st=r['stage_ms']; ms=sum(v for kk,v in st.items() if kk!='draft')
        spec='verify' in st
        if r['decoder'] in('root-draw',):
            rd[1]+=1; rd[0]+=ms>TH
        if r['decoder']=='ar': ar[1]+=1; ar[0]+=ms>TH
        if r['decoder']!='auto': continue
        key=(r['prompt_id'],r['budget'])
        if key!=prevkey: prevkey=key; k=-1000; prev_spec=None
        if spec:
            if prev_spec is False: k=0
            if k>=0:
                b=min(k,20); posn[b]+=1; pos[b]+=ms>TH
            k+=1
        else: k=-1000
        prev_spec=spec
print('root-draw T=1 rounds >%.1f ms: %d/%d = %.2f%%'%(TH,rd[0],rd[1],100*rd[0]/rd[1]))
print('ar T=1 rounds >%.1f ms: %d/%d = %.2f%%'%(TH,ar[0],ar[1],100*ar[0]/ar[1]))
for b in sorted(posn): print('auto try round',b,'%d/%d = %.1f%%'%(pos[b],posn[b],100*pos[b]/posn[b]))
