# T = 1 time of auto beyond ar, split by what the request did (plain only; a try: at most 22 tokens
# beyond its rounds; longer speculation), summed over the runs' records.csv given as arguments.
import csv,sys
tot={'try':0,'long':0,'plain':0}; n={'try':0,'long':0,'plain':0}; T=0
for f in sys.argv[1:]:
    rows=[r for r in csv.DictReader(open(f)) if r['warmup']=='0' and r['temperature']=='1']
    ar={r['prompt_id']:float(r['seconds']) for r in rows if r['decoder']=='ar'}
    T+=3*sum(ar.values())
    for r in rows:
        if r['decoder']!='auto': continue
        spec=int(r['tokens'])-int(r['rounds'])  # rough: extra tokens
        rd=int(r['rounds']); tk=int(r['tokens'])
        # speculative rounds unknown; classify by extra tokens: a try of 11 rounds adds ~15-20 tokens
        k='plain' if rd==tk else ('try' if tk-rd<=22 else 'long')
        tot[k]+=float(r['seconds'])-ar[r['prompt_id']]; n[k]+=1
for k in tot: print(k, n[k], '%+.2f%% of ar time'%(100*tot[k]/T))
