#!/usr/bin/env bash
# Issue 16's study from a fresh clone: one SciFact recipe per feature and the controls of its
# comparison, run one after another from all-MiniLM-L6-v2, each under /usr/bin/time -v (its peak
# memory in RUN/time.txt), then one table of them against the plain InfoNCE fine-tune
# (tools/featuretable). About 11 hours on 2 quiet cores; a recipe whose run directory already
# holds metrics.json is not run again
# (RUNS=... names the directory to look in, default runs/), so an interrupted study is resumed
# by running it again (an interrupted run itself: go run ./cmd/train -resume RUN).
#
# The study takes longer than one working session on 2 cores, and run directories do not outlive
# the machine, so KEEP=DIR copies each finished run's summary (metrics.json,
# recipe.resolved.toml, time.txt and commit.txt, the commit it ran at) into DIR/RUN-NAME; a
# recipe with a summary there is not run again either, and the table reads the summaries.
# docs/results/study holds the summaries of runs made from clean clones of main:
#
#   KEEP=docs/results/study bash tools/featuretable/study.sh
#
#   bash tools/featuretable/study.sh            # all of them
#   bash tools/featuretable/study.sh distill    # only the recipes whose name contains "distill" (and the baseline)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
only="${1:-}"
runs="${RUNS:-runs}"
keep="${KEEP:-}"
bin="$(mktemp -d)/train"
go build -o "$bin" ./cmd/train
bash tools/pretrained/get.sh all-MiniLM-L6-v2 >/dev/null

source tools/featuretable/finished.sh   # finished NAME: its latest finished run in $runs
# done_run NAME: its kept summary in $keep, else its finished run in $runs, else "".
done_run() {
  local d=""
  [ -n "$keep" ] && d=$(runs="$keep" finished "$1")
  [ -n "$d" ] || d=$(finished "$1")
  echo "$d"
}
# run NAME [again]: runs recipes/NAME.toml unless done (or when "again" is given); prints its
# run (or summary) directory.
run() {
  local name=$1 d
  d=$(done_run "$name")
  if [ -n "$d" ] && [ "${2:-}" != again ]; then echo "$d"; return; fi
  local log time
  log=$(mktemp); time=$(mktemp)
  echo "study: $name ($(date -u +%H:%M), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  /usr/bin/time -v -o "$time" "$bin" -recipe "recipes/$name.toml" >"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }
  d=$(tail -1 "$log")
  cp "$time" "$d/time.txt"
  git rev-parse HEAD >"$d/commit.txt"
  if [ -n "$keep" ]; then
    local k="$keep/$(basename "$d")"
    mkdir -p "$k.tmp"
    cp "$d/metrics.json" "$d/recipe.resolved.toml" "$d/time.txt" "$d/commit.txt" "$k.tmp/"
    mv "$k.tmp" "$k"
  fi
  echo "$d"
}
want() { [ -z "$only" ] || [[ "$1" == *"$only"* ]]; }

dirs=("$(run scifact-minilm)")
# One recipe per feature and the controls its comparison needs: BM25 negatives (dense mining's
# comparison), N = 32 at 2e-5, 8e-5 and 1.6e-4 and N = 128 at 1.6e-4, 3.2e-4 and 6.4e-4 (the
# GradCache check: each size's rate chosen on dev from its grid; N = 128 at 8 epochs, N = 32's
# number of updates, and N = 32 at 8 epochs, its control at equal epochs), three hard
# negatives without a teacher (distillation's). Variants measured on the way and reported in
# docs/results/scifact-minilm-features.md are not re-run: matryoshka (2 epochs; the 4-epoch
# recipe is the feature's), distill-kl and distill-kl-bm25 (steps to distill-kl-hn3).
for r in scifact-minilm-bm25-negatives scifact-minilm-dense-refresh scifact-minilm-dense-refresh-margin \
         scifact-minilm-matryoshka-4ep scifact-minilm-gradcache-32 scifact-minilm-gradcache-32-lr8e-5 \
         scifact-minilm-gradcache-32-lr1.6e-4 scifact-minilm-gradcache-128 scifact-minilm-gradcache-128-lr3.2e-4 \
         scifact-minilm-gradcache-128-lr6.4e-4 scifact-minilm-gradcache-128-8ep scifact-minilm-gradcache-32-8ep \
         scifact-minilm-hn3; do
  want "$r" && dirs+=("$(run "$r")")
done
if want distill; then
  distill=(scifact-minilm-distill scifact-minilm-distill-kl-hn3)   # MarginMSE; listwise KL
  for r in "${distill[@]}"; do
    [ -n "$(done_run "$r")" ] || [ -d pretrained/scifact-minilm-teacher ] && continue
    # The teacher pools by mean (not BERT's [CLS] layout): the recipes name a copy of its
    # model, which a kept summary does not hold, so the teacher is trained here (once).
    t=$(finished scifact-minilm-teacher)
    [ -n "$t" ] || t=$(run scifact-minilm-teacher again)
    cp -r "$t/reranker-listwise" pretrained/scifact-minilm-teacher.tmp
    mv pretrained/scifact-minilm-teacher.tmp pretrained/scifact-minilm-teacher
  done
  for r in "${distill[@]}"; do dirs+=("$(run "$r")"); done
fi
go run ./tools/featuretable "${dirs[@]}"
