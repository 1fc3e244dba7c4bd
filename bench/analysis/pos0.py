import json,sys,collections,statistics as st
acc=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sys.argv[1:]:
  prev=None; prevkey=None
  for l in open(f):
    r=json.loads(l)
    if r['temperature']!=1.0 or r['decoder']!='auto' or r.get('warmup'): continue
    key=(r['prompt_id'],r['budget'])
    if key!=prevkey: prev=None; prevkey=key
    m='S' if 'verify' in r['stage_ms'] else 'a'
    if m=='S':
        tag='after_plain' if prev=='a' else ('steady' if prev=='S' else 'req_start')
        for k,v in r['stage_ms'].items(): acc[tag][k].append(v)
        acc[tag]['n'].append(1)
    prev=m
for tag in acc:
    print(tag, 'n',len(acc[tag]['n']), ' '.join('%s %.3f'%(k,st.mean(v)) for k,v in sorted(acc[tag].items()) if k!='n'))
