#!/usr/bin/env bash
# tools/scale/run.sh [N ...]: a thin wrapper of the bench's scale workload (cmd/bench -only
# scale; bench/scale.go is the one implementation): run recipes/scale-synth.toml over synthetic
# corpora of N passages each (default 100000 500000 2000000), generated once into
# $SCALE_DATA/synth-N (default datasets/) and reused, runs and logs in $SCALE_RUNS (default
# runs/), and print each run's wall time, CPU time and peak RSS with the verdict (each grows at
# most linearly; the largest peak at most $SCALE_MAX_RSS_KB, default 4 GiB). Exits 1 when a run
# fails or the verdict is FAIL.
#
#	SCALE_DATA=/data/synth SCALE_RUNS=/data/runs tools/scale/run.sh 100000 500000 2000000
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 500000 2000000)
exec go run ./cmd/bench -only scale -scale-n "$(IFS=,; echo "${sizes[*]}")" \
	-scale-data "${SCALE_DATA:-datasets}" -scale-runs "${SCALE_RUNS:-runs}" \
	-scale-max-rss-mib "$(( ${SCALE_MAX_RSS_KB:-4194304} / 1024 ))"
