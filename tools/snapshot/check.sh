#!/usr/bin/env bash
# Runs recipes with seed 42 and compares each with docs/results/seed42-snapshot.json (metrics
# without timing keys, sha256 of every runs/*.trec): a change that must not move any number is
# checked with one command (issue 36). Run from the repository root.
#
#   bash tools/snapshot/check.sh                      # every recipe of the snapshot
#   bash tools/snapshot/check.sh retriever-cranfield rag-garden
#   UPDATE=1 bash tools/snapshot/check.sh atlas-garden    # record the run as the entry instead
#
# NAME is recipes/NAME.toml, except scale-synth-N: recipes/scale-synth.toml over the synthetic
# corpus of `go run ./tools/synth -n N -seed 42` (generated into datasets/synth-N when missing).
# Runs go to the recipe's output_dir (runs/), logs and scale recipes to $RUNS (default
# runs/snapshot); each recipe's wall time is printed. Prefix with
# `nice` and set GOMAXPROCS on a shared machine; the numbers do not depend on either.
# Exit status: 0 when every recipe is identical, 1 otherwise.
set -euo pipefail
root=$(pwd)
runs=${RUNS:-$root/runs/snapshot}
mkdir -p "$runs"
bin=$(mktemp -d)/train
go build -o "$bin" ./cmd/train
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	mapfile -t names < <(go run ./tools/snapshot -list)
fi
status=0
for name in "${names[@]}"; do
	recipe=recipes/$name.toml
	cmd="go run ./cmd/train -recipe $recipe"
	if [[ $name =~ ^scale-synth-([0-9]+)$ ]]; then
		n=${BASH_REMATCH[1]}
		data=$root/datasets/synth-$n
		if [ ! -d "$data" ]; then
			go run ./tools/synth -n "$n" -seed 42 -out "$data"
		fi
		recipe=$runs/$name.toml
		sed -e "0,/^name = .*/s||name = \"$name\"|" -e "s|^dir = \"../datasets/synth\"|dir = \"$data\"|" \
			-e "s|^output_dir = .*|output_dir = \"$runs\"|" recipes/scale-synth.toml >"$recipe"
		cmd="go run ./tools/synth -n $n -seed 42 -out datasets/synth-$n; go run ./cmd/train -recipe recipes/scale-synth.toml with data.dir = datasets/synth-$n"
	fi
	log=$runs/$name.log
	before=$(date +%s)
	if ! "$bin" -recipe "$recipe" >"$log.out" 2>"$log"; then
		echo "$name: the run failed (log in $log)"
		status=1
		continue
	fi
	secs=$(($(date +%s) - before))
	dir=$(tail -n 1 "$log.out") # train prints the run directory as its last line
	if [ -z "$dir" ] || [ ! -f "$dir/metrics.json" ]; then
		echo "$name: cannot find the run directory in $log"
		status=1
		continue
	fi
	if [ -n "${UPDATE:-}" ]; then
		go run ./tools/snapshot -name "$name" -run "$dir" -update -command "$cmd" || status=1
	else
		go run ./tools/snapshot -name "$name" -run "$dir" || status=1
	fi
	echo "$name: ${secs} s wall ($dir)"
done
exit $status
