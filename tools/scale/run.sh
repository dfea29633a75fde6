#!/usr/bin/env bash
# tools/scale/run.sh [N ...]: run recipes/scale-synth.toml (kind retriever, bow encoder, the
# corpus streamed above index.stream_above) over synthetic corpora of N passages each (default
# 100000 500000 2000000), and print the wall time, CPU time (user + system) and peak RSS
# (/usr/bin/time -v) of each run,
# with the peak RSS per passage, the load average at its end and its test nDCG@10.
#
# A corpus is generated once (go run ./tools/synth -n N -seed 42 -out $SCALE_DATA/synth-N; 1,000
# queries) and reused; runs go to $SCALE_RUNS. It exits 1 when a run fails or peaks above
# $SCALE_MAX_RSS_KB (default 4 GiB, the issue's budget at 2M).
#
#	SCALE_DATA=/data/synth SCALE_RUNS=/data/runs tools/scale/run.sh 100000 500000 2000000
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 500000 2000000)
data_root=$(realpath -m "${SCALE_DATA:-datasets}")
runs_root=$(realpath -m "${SCALE_RUNS:-runs}")
max_kb=${SCALE_MAX_RSS_KB:-4194304}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/train" ./cmd/train
go build -o "$work/synth" ./tools/synth
mkdir -p "$data_root" "$runs_root"
status=0
rows=()
for n in "${sizes[@]}"; do
	data="$data_root/synth-$n"
	if [ ! -f "$data/corpus.jsonl" ]; then
		"$work/synth" -n "$n" -seed 42 -out "$data"
	fi
	recipe="$work/scale-synth-$n.toml"
	sed -e "s|^dir = .*|dir = \"$data\"|" -e "0,/^name = /s|^name = .*|name = \"scale-synth-$n\"|" \
		-e "s|^output_dir = .*|output_dir = \"$runs_root\"|" recipes/scale-synth.toml >"$recipe"
	log="$runs_root/scale-synth-$n.log"
	if ! /usr/bin/time -v -o "$work/time-$n" "$work/train" -recipe "$recipe" >"$log" 2>&1; then
		echo "scale: $n passages: the run failed; see $log" >&2
		status=1
		continue
	fi
	run=$(tail -1 "$log")
	wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time-$n")
	kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time-$n")
	cpu=$(awk -F': ' '/User time|System time/{s+=$2} END{printf "%.1f", s}' "$work/time-$n")
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	ndcg=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print("%.4f %.4f" % (m["bm25/nDCG@10"], m["dense/nDCG@10"]))' "$run/metrics.json")
	rows+=("$(printf '%9d %10s %8s %9d %9d   %-16s %s' "$n" "$wall" "$cpu" "$((kb / 1024))" "$((kb * 1024 / n))" "$load" "$ndcg")")
	if [ "$kb" -gt "$max_kb" ]; then
		echo "scale: $n passages peaked at $kb KB, above $max_kb KB" >&2
		status=1
	fi
	cp "$work/time-$n" "$runs_root/scale-synth-$n.time"
done
printf '%9s %10s %8s %9s %9s   %-16s %s\n' passages wall cpu_s peak_MB B/passage "load avg" "nDCG@10 bm25 dense"
printf '%s\n' "${rows[@]}"
exit $status
