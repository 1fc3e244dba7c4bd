# For the 16 final runs: how often auto (best cap) and each fixed (rule, B) is within 3% of the
# best fixed of its run, and the mean ratio of each cell to ar. Run inside the results folder.
import statistics as st
from cells_json import run_cells
runs={s: run_cells(f'final-run-{s}.summary.json') for s in range(1,17)}
for T in '01':
    cnt={}; ratio={}
    for s,r in runs.items():
        ar=r[('ar',T,'-')]
        fixed={k:v for k,v in r.items() if k[1]==T and k[0]!='auto'}
        bf=max(fixed.values())
        cands=dict(fixed); cands[('auto (best cap)',T,'')]=max(r[('auto',T,b)] for b in ('4','8','16'))
        for b in ('4','8','16'): cands[('auto',T,b)]=r[('auto',T,b)]
        for k,v in cands.items():
            cnt[k]=cnt.get(k,0)+(v>=0.97*bf); ratio.setdefault(k,[]).append(v/ar)
    print(f'T = {T}: within 3% of the best fixed of its run (of 16), mean ratio to ar')
    for k in sorted(cnt,key=lambda k:-st.mean(ratio[k])): print(f'  {k[0]:>16} {k[2]:>3}  {cnt[k]:2d}/16  {st.mean(ratio[k]):.3f}')
