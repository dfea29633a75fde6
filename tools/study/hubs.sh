#!/bin/bash
# Where the top-1 passage of each test question comes from (the gold entry, news, or another
# gardener's entry by the gardener's role): how many test questions the retriever-training
# gardeners' entries capture (hubs).  usage: tools/study/hubs.sh RUN/world RUN/runs/test.X.trec ...
W=$1; shift
for f in "$@"; do awk '$4==1{print $1,$3}' $f | W=$W F=$f python3 -c "
import sys,json,os
W=os.environ['W']
qs={};g={}
for l in open(W+'/questions.jsonl'):
    q=json.loads(l); qs[q['id']]=q
for l in open(W+'/gardeners.jsonl'):
    x=json.loads(l); g[x['id']]=x
c={'retriever-training':0,'reader-training (dev)':0,'test':0}; gold=news=n=0
for line in sys.stdin:
    qid,doc=line.split()
    q=qs[qid]
    if not q['has_entry']: continue
    n+=1
    if doc==q['gardener']: gold+=1; continue
    if not doc.startswith('g'): news+=1; continue
    b=g[doc]
    k='test' if b['split']!='train' else ('retriever-training' if (b['index']//4)%2==1 else 'reader-training (dev)')
    c[k]+=1
print(os.environ['F'], 'top-1 gold %.3f news %.3f, another gardener\'s entry:'%(gold/n,news/n), {k:'%.3f'%(v/n) for k,v in c.items()})
"; done
