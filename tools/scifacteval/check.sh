#!/usr/bin/env bash
# Cross-checks eval.ScoreSciFact against SciFact's official evaluator (official/, verbatim from
# allenai/scifact): five systems' predictions over the real claims of a split (systems.py),
# scored by both; every precision, recall and F1 must agree to 1e-12.
#
#   tools/scifacteval/check.sh [split] [RUN]  # split: test (default), dev or train
#
# With RUN (a scifact_verify run directory), every RUN/runs/<split>.<system>.scifact.jsonl is
# cross-checked too: the real systems' predictions, scored by both sides.
#
# Needs Python 3 with pandas (the official metrics.py imports it): $PYTHON, else .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/../.."
split=${1:-test}
run=${2:-}
py=${PYTHON:-.venv/bin/python}
gold=datasets/scifact/verify/claims_$split.jsonl
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
systems="oracle flipped random support_cited gold_overpredict"
"$py" tools/scifacteval/systems.py --gold "$gold" --corpus datasets/scifact/corpus.jsonl --out "$out"
go build -o "$out/scifacteval" ./tools/scifacteval
for f in ${run:+"$run"/runs/$split.*.scifact.jsonl}; do
	[ -e "$f" ] || { echo "check.sh: $run holds no runs/$split.*.scifact.jsonl" >&2; exit 2; }
	s=run.$(basename "$f" .scifact.jsonl | sed "s/^$split\.//")
	cp "$f" "$out/$s.jsonl"
	systems="$systems $s"
done
for s in $systems; do
	"$out/scifacteval" -gold "$gold" -pred "$out/$s.jsonl" > "$out/$s.go.json"
	"$py" -W ignore tools/scifacteval/official/verisci/evaluate/pipeline.py --gold "$gold" \
		--corpus "$out/corpus.jsonl" --prediction "$out/$s.jsonl" --output "$out/$s.official.json" > /dev/null
done
"$py" tools/scifacteval/compare.py "$out" $systems
