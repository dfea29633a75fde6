#!/usr/bin/env bash
# Run the sentence-transformers peer of a ragtrain retriever run and score both sides with the
# toolkit's metrics:
#
#   bash tools/peer/run.sh runs/scifact-minilm-YYYYMMDD-HHMMSS [OUT_DIR]
#
# OUT_DIR defaults to RUN_DIR/peer. Creates the repository's venv first (tools/pyenv/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
run="$(cd "$1" && pwd)"
out="${2:-$run/peer}"
py="$(bash "$root/tools/pyenv/setup.sh")"
echo "peer: load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" "$root/tools/peer/st_finetune.py" --run "$run" --out "$out"
echo "peer: load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
split="$(grep -m1 '^test_split' "$run/recipe.resolved.toml" | sed 's/.*= *"\(.*\)"/\1/')"
data="$(grep -m1 '^dir' "$run/recipe.resolved.toml" | sed 's/.*= *"\(.*\)"/\1/')"
cd "$root" && go run ./tools/treceval -data "$data" -split "$split" "$run/runs/$split.zeroshot.trec" "$out/$split.zeroshot.trec" "$run/runs/$split.finetuned.trec" "$out/$split.finetuned.trec"
