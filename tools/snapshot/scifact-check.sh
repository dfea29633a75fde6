#!/usr/bin/env bash
# Compares two builds of cmd/train on the scifact-minilm recipes without running them to the end
# (issue 36: a refactor that must not move any number). Run from the repository root:
#
#   go build -o /tmp/train-old ./cmd/train   # in a worktree of the old commit
#   go build -o /tmp/train-new ./cmd/train
#   nice -n 10 env GOMAXPROCS=1 bash tools/snapshot/scifact-check.sh /tmp/train-old /tmp/train-new [CHECK...]
#
# CHECK (default: all, in this order):
#   teacher        recipes/scifact-minilm-teacher.toml (reranker, listwise)   first 10 log records
#   gradcache      recipes/scifact-minilm-gradcache-32.toml (GradCache)       first 10 log records
#   buckets        recipes/scifact-minilm-bm25-negatives.toml with train.dynamic_padding = true
#                  (no shipped recipe sets it: the length-bucketed training graphs)   first 10 log records
#   matryoshka     recipes/scifact-minilm-matryoshka.toml                     first 10 log records
#   dense-refresh  recipes/scifact-minilm-dense-refresh.toml                  first 10 log records
#   step50         recipes/scifact-minilm.toml unchanged: sha256 of the step-50 checkpoint's
#                  model.safetensors (checkpoint_every = 50 is the recipe's own)
#
# The log checks set train.log_every = 1 on both sides (a log line per step: its loss is that
# step's, not a 10-step mean; log_every changes nothing but the log) and stop the run once
# log.jsonl holds $RECORDS step records (default 10); phase, step, loss, lr and grad_norm of each
# must be identical.
# step50 stops the run once the checkpoint directory of step 50 exists (it appears by rename,
# complete). Every run is killed there (SIGKILL): no schedule key is changed. The recipes are
# copied into $WORK (default a temp directory) with their ../ paths made absolute to this checkout
# and output_dir set to a fresh directory per side, so both binaries read the same files.
# Prints one line per check and its wall times; exit status 0 when every check is identical.
set -euo pipefail
if [ $# -lt 2 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d'
	exit 2
fi
old=$(realpath "$1")
new=$(realpath "$2")
shift 2
root=$(pwd)
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
nrec=${RECORDS:-10}
checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(teacher gradcache buckets matryoshka dense-refresh step50)

# recipe SRC DST [section.key=value...]: DST is SRC with ../ made absolute and each override set
# (replaced inside its section, or added as the section's first key).
recipe() {
	local src=$1 dst=$2
	shift 2
	sed -e "s|\"\.\./|\"$root/|g" "$src" >"$dst"
	local kv sec key val
	for kv in "$@"; do
		sec=${kv%%.*} key=${kv#*.} key=${key%%=*} val=${kv#*=}
		awk -v sec="[$sec]" -v key="$key" -v val="$val" '
			/^\[/ { if (in_sec && !done) { print key " = " val; done = 1 } in_sec = ($0 == sec) }
			in_sec && !done && $0 ~ "^" key "[ \t]*=" { print key " = " val; done = 1; next }
			in_sec && !done && $0 == sec { print; next }
			{ print }
			END { if (in_sec && !done) print key " = " val }' "$dst" >"$dst.tmp"
		mv "$dst.tmp" "$dst"
		grep -q "^$key = $val\$" "$dst" || { echo "override $kv not applied to $dst" >&2; exit 2; }
	done
}

# run BIN RECIPE OUT STOP: runs BIN on RECIPE with output_dir OUT until the shell test STOP
# (evaluated with $rundir set to the run directory) holds, then kills it; prints the wall seconds
# and the load average when it started.
run() {
	local bin=$1 rec=$2 out=$3 stop=$4
	mkdir -p "$out"
	sed -i -e "s|^output_dir = .*|output_dir = \"$out\"|" "$rec"
	local before pid load
	before=$(date +%s) load=$(cut -d' ' -f1 /proc/loadavg)
	"$bin" -recipe "$rec" >"$out/stdout" 2>"$out/stderr" &
	pid=$!
	while :; do
		sleep 2
		rundir=$(find "$out" -mindepth 1 -maxdepth 1 -type d | head -n 1)
		if [ -n "$rundir" ] && eval "$stop"; then
			kill -KILL "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
			break
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" || { echo "$rec: the run failed (log in $out/stderr)" >&2; tail -n 5 "$out/stderr" >&2; }
			break
		fi
	done
	echo "$(($(date +%s) - before)) s (load $load at start)"
}

records() { # the step records of a log.jsonl, the compared fields only
	jq -c 'select(has("loss")) | {phase, step, loss, lr, grad_norm}' "$1"
}

status=0
for check in "${checks[@]}"; do
	overrides=(train.log_every=1)
	case $check in
	teacher) name=scifact-minilm-teacher ;;
	gradcache) name=scifact-minilm-gradcache-32 ;;
	buckets) name=scifact-minilm-bm25-negatives overrides+=(train.dynamic_padding=true) ;;
	matryoshka) name=scifact-minilm-matryoshka ;;
	dense-refresh) name=scifact-minilm-dense-refresh ;;
	step50) name=scifact-minilm overrides=() ;;
	*) echo "unknown check $check" >&2; exit 2 ;;
	esac
	secs=()
	for side in ${SIDES:-old new}; do
		bin=$old
		[ $side = new ] && bin=$new
		dir=$work/$check/$side
		rm -rf "$dir"
		mkdir -p "$dir"
		rec=$dir/$name.toml
		recipe "recipes/$name.toml" "$rec" "${overrides[@]}"
		if [ $check = step50 ]; then
			stop='[ -n "$(find "$rundir" -type d -name "checkpoint*-50" | head -n 1)" ]'
		else
			stop='[ -f "$rundir/log.jsonl" ] && [ "$(grep -c "\"loss\"" "$rundir/log.jsonl")" -ge $nrec ]'
		fi
		secs+=("$(run "$bin" "$rec" "$dir/runs" "$stop")")
	done
	[ ${#secs[@]} -eq 2 ] || secs=("${secs[0]}" "${secs[0]}")
	o=$(find "$work/$check/old/runs" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	n=$(find "$work/$check/new/runs" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	if [ $check = step50 ]; then
		a=$(sha256sum "$(find "$o" -type d -name 'checkpoint*-50' | head -n 1)/model.safetensors" | cut -d' ' -f1)
		b=$(sha256sum "$(find "$n" -type d -name 'checkpoint*-50' | head -n 1)/model.safetensors" | cut -d' ' -f1)
		what="step-50 model.safetensors sha256 old $a new $b"
		[ "$a" = "$b" ] && [ -n "$a" ] && verdict=identical || verdict=DIFFERENT
	else
		records "$o/log.jsonl" | head -n "$nrec" >"$work/$check/old.records"
		records "$n/log.jsonl" | head -n "$nrec" >"$work/$check/new.records"
		cnt=$(wc -l <"$work/$check/old.records")
		what="first $cnt log records (phase, step, loss, lr, grad_norm; sha256 $(sha256sum <"$work/$check/old.records" | cut -c1-16))"
		if [ "$cnt" -eq "$nrec" ] && cmp -s "$work/$check/old.records" "$work/$check/new.records"; then
			verdict=identical
		else
			verdict=DIFFERENT
			diff "$work/$check/old.records" "$work/$check/new.records" || true
		fi
	fi
	[ $verdict = identical ] || status=1
	echo "$check ($name ${overrides[*]}): $verdict: $what; wall old ${secs[0]}, new ${secs[1]}; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
done
exit $status
