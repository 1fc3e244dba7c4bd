# Pool wait of root-draw with draft-ahead against without, same run: ms a round (the cell's
# stage_pool_wait_ms summed over its decodes, over its rounds, from each run's records.csv).
import csv,collections,gzip,os,statistics as st
means=collections.defaultdict(list)
print('# Pool wait of root-draw with draft-ahead (root-draw+ahead) against without (root-draw), same run: ms a round, without/with.')
for s in range(1,17):
    acc=collections.defaultdict(lambda:[0.0,0])
    path=f'final-run-{s}.records.csv'
    for r in csv.DictReader(open(path) if os.path.exists(path) else gzip.open(path+'.gz','rt')):
        if r['warmup']=='1' or r['decoder'] not in ('root-draw','root-draw+ahead'): continue
        a=acc[(r['decoder'],r['temperature'],r['budget'])]; a[0]+=float(r['stage_pool_wait_ms']); a[1]+=int(r['rounds'])
    cells=[]
    for T in ('0','1'):
        for B in ('4','8','16'):
            w=acc[('root-draw',T,B)]; h=acc[('root-draw+ahead',T,B)]
            x,y=w[0]/w[1],h[0]/h[1]; means[(T,B)].append((x,y)); cells.append(f'T={T} B={B} {x:.3f}/{y:.3f}')
    print(f'run {s}: '+'  '.join(cells))
print('mean of 16 runs: '+'  '.join(f'T={T} B={B} {st.mean(x for x,_ in v):.3f}/{st.mean(y for _,y in v):.3f}' for (T,B),v in means.items()))
