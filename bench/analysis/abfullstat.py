import re,glob,sys,statistics as st
p=sys.argv[1]
res={}
for f in glob.glob(p+'-*-*.log'):
    m=re.search(r'-([AB])-(\d+)\.log$',f); arm,seed=m[1],int(m[2])
    rows={}
    for l in open(f):
        mm=re.match(r'^(\S+)\s+([01])\s+(\S+)\s+\d+\s+([\d.]+)',l)
        if mm: rows[(mm[1],mm[2],mm[3])]=float(mm[4])
    for T in '01':
        ar=rows[('ar',T,'-')]
        autos=[rows[('auto',T,b)]/ar for b in ('4','8','16')]
        best=max(v for k,v in rows.items() if k[1]==T and k[0]!='auto')/ar
        res[(arm,seed,T)]=(autos,best)
for T in '01':
  for arm in 'AB':
    ks=sorted(k for k in res if k[0]==arm and k[2]==T)
    if not ks: continue
    cells=[x for k in ks for x in res[k][0]]
    bestcap=[max(res[k][0]) for k in ks]; rel=[max(res[k][0])/res[k][1]-1 for k in ks]
    print('T=%s %s mean cell %.3f  best cap: %s  vs best fixed: %s'%(T,arm,st.mean(cells),' '.join('%.3f'%x for x in bestcap),' '.join('%+.1f'%(100*x) for x in rel)))
