#!/usr/bin/env bash
# Peak memory of a cached in-batch-negatives (GradCache) training step against the batch size N
# (issue 16: "N = 256 fits in the memory that m = 32 needs"): recipes/scifact-minilm-gradcache-128.toml
# (all-MiniLM-L6-v2, claims at L 64, abstracts and one BM25 hard negative each at L 256) run for
# STEPS steps (default 2) at each batch size, uncached and cached in chunks of m rows, each under
# /usr/bin/time -v; no dense evaluation (eval.systems = ["bm25"], no dev split), so the peak is
# the training step's, plus the process's fixed cost (the model, AdamW's moments, SciFact's tokens);
# each run is stopped when its train phase ends.
#
#   bash tools/pretrained/get.sh all-MiniLM-L6-v2
#   bash tools/featuretable/gradcache-memory.sh            # "N m" pairs below; m 0 = uncached
#   bash tools/featuretable/gradcache-memory.sh "256 32"   # one of them
#
# Prints a Markdown table (N, m, steps, peak RSS, wall seconds). Results:
# docs/results/scifact-minilm-features.md. A step of N = 256 takes about 5 minutes on one core.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
steps="${STEPS:-2}"
pairs=("$@")
[ ${#pairs[@]} -gt 0 ] || pairs=("16 0" "32 0" "32 16" "128 16" "256 16" "32 32" "256 32")
[ -d pretrained/all-MiniLM-L6-v2 ] || { echo "gradcache-memory: run bash tools/pretrained/get.sh all-MiniLM-L6-v2 first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/train" ./cmd/train
echo "| batch N | chunk m | steps | peak RSS GiB | wall s |"
echo "|---|---|---|---|---|"
for p in "${pairs[@]}"; do
  read -r n m <<<"$p"
  r="$tmp/gradcache-memory-$n-$m.toml"
  mini="mini_batch_size = $m"
  [ "$m" -gt 0 ] || mini=""
  # The recipe with its paths made absolute, its [train] sizes replaced and evaluation cut to BM25.
  sed -e "s#\"\.\./#\"$root/#" \
      -e "s/^name = \"scifact-minilm-gradcache-128\"/name = \"gradcache-memory-$n-$m\"/" \
      -e "s/^output_dir = .*/output_dir = \"${tmp//\//\\/}\/runs\"/" \
      -e "s/^steps = .*/steps = $steps/" -e "s/^batch_size = .*/batch_size = $n/" \
      -e "s/^mini_batch_size = .*/$mini/" -e "s/^warmup_steps = .*/warmup_steps = 0/" \
      -e "s/^checkpoint_every = .*/checkpoint_every = 0/" -e "s/^systems = .*/systems = [\"bm25\"]/" \
      -e "s/^dev_split = .*/dev_split = \"\"/" -e "s/^select_metric = .*/select_metric = \"\"/" \
      recipes/scifact-minilm-gradcache-128.toml >"$r"
  grep -q "^batch_size = $n\$" "$r" || { echo "gradcache-memory: recipes/scifact-minilm-gradcache-128.toml changed shape" >&2; exit 1; }
  start=$(date +%s)
  # The run is stopped once its train phase has ended ("train: S steps in ..."): what follows
  # (the corpus encoded for the test split and the export) is not the step's memory.
  log="$tmp/log-$n-$m"
  : >"$log"
  /usr/bin/time -v -o "$tmp/time.txt" "$tmp/train" -recipe "$r" >>"$log" 2>&1 &
  tpid=$!
  until grep -qa "^train: $steps steps in" "$log"; do
    kill -0 "$tpid" 2>/dev/null || { tr '\r' '\n' <"$log" | tail -20 >&2; echo "gradcache-memory: N $n m $m ended before its train phase did" >&2; exit 1; }
    sleep 2
  done
  pkill -9 -P "$tpid" || true
  wait "$tpid" || true
  kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time.txt")
  printf "| %d | %s | %d | %.2f | %d |\n" "$n" "$([ "$m" -gt 0 ] && echo "$m" || echo "- (uncached)")" "$steps" "$(echo "$kb / 1048576" | bc -l)" "$(( $(date +%s) - start ))"
done
