#!/usr/bin/env bash
# Cross-checks eval.ScoreSciFact against SciFact's official evaluator (official/, verbatim from
# allenai/scifact): five systems' predictions over the real claims of a split (systems.py),
# scored by both; every precision, recall and F1 must agree to 1e-12.
#
#   tools/scifacteval/check.sh [split]        # split: test (default), dev or train
#
# Needs Python 3 with pandas (the official metrics.py imports it): $PYTHON, else .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/../.."
split=${1:-test}
py=${PYTHON:-.venv/bin/python}
gold=datasets/scifact/verify/claims_$split.jsonl
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
systems="oracle flipped random support_cited gold_overpredict"
"$py" tools/scifacteval/systems.py --gold "$gold" --corpus datasets/scifact/corpus.jsonl --out "$out"
go build -o "$out/scifacteval" ./tools/scifacteval
for s in $systems; do
	"$out/scifacteval" -gold "$gold" -pred "$out/$s.jsonl" > "$out/$s.go.json"
	"$py" -W ignore tools/scifacteval/official/verisci/evaluate/pipeline.py --gold "$gold" \
		--corpus "$out/corpus.jsonl" --prediction "$out/$s.jsonl" --output "$out/$s.official.json" > /dev/null
done
"$py" tools/scifacteval/compare.py "$out" $systems
