#!/bin/bash
# Re-run one system of a finished retriever study (kind realm, replug or atlas) from its saved
# start with some recipe keys changed, without redoing the preparation (world, reader, warm-up):
# the start is deterministic, so the numbers are those of a fresh run with the same keys.
#
#   tools/study/variant.sh RUN NAME 'section:key = value' ...
#   tools/study/variant.sh runs/realm-garden-20261201-160403 plr001 'realm:systems = ["async"]' 'realm:passage_lr_scale = 0.01'
#
# writes runs/v-NAME (resumed with `go run ./cmd/train -resume`, or $BIN) and prints its
# retrieval metrics (dev and test Recall@1/@5), reader exact match over the top passage and
# training seconds.
set -e
base=$1; name=$2; shift 2
d=$(dirname "$base")/v-$name
rm -rf "$d"; mkdir -p "$d/runs"
cp -r "$base/start" "$base/tokenizer.json" "$base/recipe.resolved.toml" "$base/log.jsonl" "$d/"
python3 - "$d/recipe.resolved.toml" "$@" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
for kv in sys.argv[2:]:
    sec, kv = kv.split(':', 1)
    k = kv.split('=')[0].strip()
    m = re.search(r'(?ms)^\[' + sec + r'\]\n(.*?)(?=^\[|\Z)', s)
    body = m.group(1)
    if re.search(r'(?m)^' + k + r'\s*=', body):
        body = re.sub(r'(?m)^' + k + r'\s*=.*$', kv, body)
    else:
        body = kv + '\n' + body
    s = s[:m.start(1)] + body + s[m.end(1):]
open(p, 'w').write(s)
PY
${BIN:-go run ./cmd/train} -resume "$d" > "$d.out" 2> "$d.err"
python3 - "$d" "$name" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + '/metrics.json'))
print(sys.argv[2], json.dumps({k: round(v, 4) for k, v in sorted(m.items())
      if ('Recall@' in k or k.endswith('top1/EM') or k.endswith('/train_seconds')) and 'bm25' not in k}))
PY
