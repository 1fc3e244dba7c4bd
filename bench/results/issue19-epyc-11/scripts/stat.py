import re,sys,glob,statistics as st
def load(f):
    rows={}
    for l in open(f):
        m=re.match(r'^(\S+)\s+([01])\s+(\S+)\s+\d+\s+([\d.]+)',l)
        if m: rows[(m[1],m[2],m[3])]=float(m[4])
    return rows
arms=sys.argv[1:] or ['old','new']
for arm in arms:
    for T in '01':
        vs=[];w=0;thr=0;n=0;vsrd=[]
        for f in sorted(glob.glob(f'/tmp/ab11/{arm}-'+__import__('os').environ.get('SEEDPAT','*')+'.txt')):
            r=load(f)
            if ('ar',T,'-') not in r: continue
            ar=r[('ar',T,'-')]
            fixed={k:v for k,v in r.items() if k[1]==T and k[0]!='auto'}
            bf=max(fixed.values())
            best=max(r[('auto',T,b)] for b in ('4','8','16'))
            vs.append(100*(best/bf-1)); w+=best>=0.97*bf; thr+=best/ar>=(1.35 if T=='0' else 1.0); n+=1
        if n: print(f'{arm} T={T} n={n} auto best cap vs best fixed mean {st.mean(vs):+.2f}  within3% {w}/{n}  thr {thr}/{n}  ', ' '.join(f'{x:+.1f}' for x in vs))
