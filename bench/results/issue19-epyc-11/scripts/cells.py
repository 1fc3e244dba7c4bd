import re,sys,glob,statistics as st
def load(f):
    rows={}
    for l in open(f):
        m=re.match(r'^(\S+)\s+([01])\s+(\S+)\s+\d+\s+([\d.]+)',l)
        if m: rows[(m[1],m[2],m[3])]=float(m[4])
    return rows
for arm in sys.argv[1:]:
    for T in '01':
        d={}
        for f in sorted(glob.glob(f'/tmp/ab11/{arm}-'+__import__('os').environ.get('SEEDPAT','*')+'.txt')):
            r=load(f)
            if ('ar',T,'-') not in r: continue
            for k,v in r.items():
                if k[1]==T: d.setdefault((k[0],k[2]),[]).append(v/r[('ar',T,'-')])
        keys=[('auto','4'),('auto','8'),('auto','16'),('root-draw','4'),('root-draw','8'),('draft','4'),('draft','8')]
        print(arm,'T='+T,'n=%d'%len(d.get(('ar','-'),[])),' '.join('%s%s %.3f'%(k[0][:2],k[1],st.mean(d[k])) for k in keys if k in d))
