#!/usr/bin/env bash
# Issue 37's done-when probes: eight hostile inputs to `train`, each run under an 8 GiB
# address-space limit (ulimit -v 8388608) and measured with /usr/bin/time -v. Each must exit 1
# with one line of output, no panic or fatal error, a peak RSS under 1 GiB, and leave no run
# directory. Prints one row per probe and exits 1 if any fails.
#
#   bash tools/hostile/probes.sh [WORKDIR]     # about 1 min on 2 cores (a tiny run to export first)
set -u
cd "$(dirname "$0")/../.."
root=$PWD
W=${1:-$(mktemp -d /tmp/hostile-probes.XXXXXX)}
mkdir -p "$W"
go build -o "$W/train" ./cmd/train || exit 1
out="$W/runs"

# A small exported Transformer bi-encoder, from a run of 4 steps.
cat > "$W/tiny.toml" <<TOML
kind = "retriever"
name = "tiny"
output_dir = "$W/tinyruns"
[data]
dir = "$root/datasets/cranfield"
[tokenizer]
train = true
vocab_size = 2000
max_length = 32
[model]
encoder = "transformer"
layers = 2
heads = 2
ffn = 64
hidden = 32
max_position = 64
[train]
steps = 4
batch_size = 8
log_every = 2
[eval]
systems = ["bm25", "dense"]
TOML
if [ ! -d "$W/bi" ]; then
  run=$("$W/train" -recipe "$W/tiny.toml" 2>/dev/null | tail -1)
  "$W/train" export -run "$run" -out "$W/bi" >/dev/null 2>&1 || { echo "export of $run failed"; exit 1; }
fi

# fresh DIR: a copy of the export to damage
fresh() { rm -rf "$W/$1"; cp -r "$W/bi" "$W/$1"; }
setcfg() { sed -i -E "s/\"$2\": *[0-9]+/\"$2\": $3/" "$W/$1/config.json"; }
initrec() { # NAME DIR: a recipe starting from DIR
  cat > "$W/$1.toml" <<TOML
kind = "retriever"
name = "$1"
output_dir = "$out"
[data]
dir = "$root/datasets/cranfield"
[model]
init_from = "$W/$2"
[train]
steps = 2
batch_size = 8
TOML
}
sizerec() { # NAME ENCODER EXTRA: a recipe with a huge size key
  printf 'kind = "retriever"\nname = "%s"\noutput_dir = "%s"\n[data]\ndir = "%s/datasets/cranfield"\n%b' "$1" "$out" "$root" "$3" > "$W/$1.toml"
}

fresh ffn;    setcfg ffn intermediate_size 1000000000;      initrec p1 ffn
fresh layers; setcfg layers num_hidden_layers 100000;       initrec p2 layers
fresh hidden; setcfg hidden hidden_size 1000000000
rm -rf "$W/hidden/modules.json" "$W/hidden/1_Pooling" "$W/hidden/sentence_bert_config.json" "$W/hidden/config_sentence_transformers.json"
initrec p3 hidden
fresh zero;   rm "$W/zero/config.json"; ln -s /dev/zero "$W/zero/config.json"; initrec p4 zero
sizerec p5 bow '[tokenizer]\ntrain = true\nmax_length = 1000000000\n[model]\nencoder = "bow"\n'
sizerec p6 transformer '[tokenizer]\ntrain = true\n[model]\nencoder = "transformer"\nmax_position = 1000000000\n'
sizerec p7 transformer '[tokenizer]\ntrain = true\n[model]\nencoder = "transformer"\nhidden = 1000000\n'

fail=0
printf '%-48s %4s %5s %9s %6s %7s  %s\n' probe exit lines "RSS MiB" panic rundirs "output"
probe() { # LABEL RECIPE
  rm -rf "$out"; mkdir -p "$out"
  ( ulimit -v 8388608; /usr/bin/time -v -o "$W/time.txt" "$W/train" -recipe "$2" >"$W/o.txt" 2>&1 ); rc=$?
  rss=$(( $(awk -F: '/Maximum resident/ {print $2}' "$W/time.txt") / 1024 ))
  lines=$(wc -l < "$W/o.txt")
  panic=$(grep -cE 'panic|fatal error|goroutine ' "$W/o.txt")
  dirs=$(find "$out" -mindepth 1 -maxdepth 1 | wc -l)
  ok=PASS
  if [ "$rc" != 1 ] || [ "$lines" != 1 ] || [ "$panic" != 0 ] || [ "$rss" -ge 1024 ] || [ "$dirs" != 0 ]; then ok=FAIL; fail=1; fi
  printf '%-48s %4s %5s %9s %6s %7s  %s %s\n' "$1" "$rc" "$lines" "$rss" "$panic" "$dirs" "$ok" "$(head -c 200 "$W/o.txt" | head -1)"
}
probe "init_from intermediate_size 1e9"             "$W/p1.toml"
probe "init_from num_hidden_layers 100000"          "$W/p2.toml"
probe "init_from hidden_size 1e9, no ST files"      "$W/p3.toml"
probe "init_from config.json -> /dev/zero"          "$W/p4.toml"
probe "bow tokenizer.max_length 1e9"                "$W/p5.toml"
probe "transformer model.max_position 1e9"          "$W/p6.toml"
probe "transformer model.hidden 1e6"                "$W/p7.toml"
probe "train -recipe /dev/zero"                     /dev/zero
exit $fail
