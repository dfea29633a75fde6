"""Sorts the pairs `duplicates` lists by what the shared lines are (issue 36 item 6).

    mkdir /tmp/dup && git ls-files '*.go' | grep -v _test.go | xargs -I{} cp --parents {} /tmp/dup/
    (cd /tmp/dup && duplicates --repo . --seconds 300 --most 200) > /tmp/dup.txt
    python3 tools/codestats/classify-duplicates.py /tmp/dup /tmp/dup.txt [CLASS]

Each side of a pair is read without blank lines, comments and lone brackets: "imports" when at
least 60% of its lines are import paths, "struct-tags" when half are fields with toml/json tags,
"flags" when half call the flag package, else "code"; " (bp)" marks the pairs the tool itself
calls boilerplate. With CLASS it also lists that class's pairs.
"""
import re,sys,collections
root=sys.argv[1]
def lines(f,a,b):
    L=open(f"{root}/{f}").read().split('\n')[a-1:b]
    out=[]
    for l in L:
        s=l.strip()
        if not s or s.startswith('//') or s in '{}()[]' or s in (')','}','{','(','},','),'): continue
        out.append(s)
    return out
def kind(ls):
    n=len(ls)
    if n==0: return 'empty'
    imp=sum(1 for s in ls if re.fullmatch(r'(\w+ )?"[\w./-]+"',s) or s.startswith('import'))
    tag=sum(1 for s in ls if '`toml:"' in s or '`json:"' in s)
    flg=sum(1 for s in ls if 'flag.' in s)
    if imp>=n*0.6: return 'imports'
    if tag>=n*0.5: return 'struct-tags'
    if flg>=n*0.5: return 'flags'
    return 'code'
c=collections.Counter(); rows=collections.defaultdict(list)
for l in open(sys.argv[2]):
    m=re.match(r'(D\d+) (\S+):(\d+)-(\d+) ~ (\S+):(\d+)-(\d+)(.*)',l)
    if not m: continue
    d,f1,a1,b1,f2,a2,b2,rest=m.groups()
    k1=kind(lines(f1,int(a1),int(b1))); k2=kind(lines(f2,int(a2),int(b2)))
    k=k1 if k1==k2 else min(k1,k2)+'/'+max(k1,k2)
    if 'boilerplate' in rest: k+=' (bp)'
    c[k]+=1; rows[k].append(l.strip())
for k,v in c.most_common(): print(v,k)
if len(sys.argv)>3:
    for r in rows[sys.argv[3]]: print(r)
