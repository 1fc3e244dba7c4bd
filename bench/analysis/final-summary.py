import re,sys,statistics as st
rows_all={}
import sys
first = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for s in range(first, first + 8):
    rows={}
    for l in open(f'final-run-{s}.txt'):
        m=re.match(r'^(\S+)\s+([01])\s+(\S+)\s+\d+\s+([\d.]+)',l)
        if m: rows[(m[1],m[2],m[3])]=float(m[4])
    rows_all[s]=rows
for T in '01':
    cells=[];met=0;within=0;bests=[]
    for s,rows in rows_all.items():
        ar=rows[('ar',T,'-')]
        fixed={k:v for k,v in rows.items() if k[1]==T and k[0]!='auto'}
        bk=max(fixed,key=fixed.get); bf=fixed[bk]/ar
        au=[rows[('auto',T,b)]/ar for b in ('4','8','16')]
        cells+=au; best=max(au); bests.append(best)
        thr=1.35 if T=='0' else 1.0
        met+=best>=thr; within+=best>=bf*0.97
        print(f"run {s} T={T} ar {ar:.0f} best fixed {bk[0]} {bk[2]}: {100*(bf-1):+.1f}  auto caps " + ' '.join(f'{100*(x-1):+.1f}' for x in au) + f"  best vs best fixed {100*(best/bf-1):+.1f}")
    print(f"T={T}: best cap range {100*(min(bests)-1):+.1f}..{100*(max(bests)-1):+.1f}, >= thr {met}/8, within 3% {within}/8, cells mean {100*(st.mean(cells)-1):+.2f}")
