#!/usr/bin/env bash
# Interoperability checks against the real sentence-transformers / transformers / tokenizers
# (tools/interop/check.py says what each checks). Creates the repository's venv first.
#
#   bash tools/interop/run.sh bi pretrained/all-MiniLM-L6-v2
#   bash tools/interop/run.sh bi EXPORT_DIR          # a fine-tuned model after `train export`
#   bash tools/interop/run.sh llama pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
#                                                    # the LLaMA decoder's logits and greedy generation (llama.py)
#   bash tools/interop/run.sh colbert [RUN]          # a ColBERT export's MaxSim of 100 SciFact pairs against PyLate (colbert_pylate.py)
#   bash tools/interop/run.sh splade pretrained/all-MiniLM-L6-v2   # the SparseEncoder export (splade.py)
#   bash tools/interop/run.sh splade --run RUN                      # of a trained kind = "splade" run
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$(bash "$root/tools/pyenv/setup.sh")"
if [ "${1:-}" = colbert ]; then
  # PyLate parity of a ColBERT export: `run.sh colbert` builds one from all-MiniLM-L6-v2 with a
  # seeded projection, `run.sh colbert RUN` exports a trained colbert run
  out="$(mktemp -d)/colbert"
  if [ -n "${2:-}" ]; then src=(-run "$2"); else src=(-init "$root/pretrained/all-MiniLM-L6-v2"); fi
  (cd "$root" && go run ./tools/interop/colbertgo "${src[@]}" -data datasets/scifact -n 100 -out "$out")
  exec "$py" "$root/tools/interop/colbert_pylate.py" "$out"
fi
if [ "${1:-}" = splade ]; then
  shift
  exec "$py" "$root/tools/interop/splade.py" "$@"
fi
if [ "${1:-}" = llama ]; then
  exec "$py" "$root/tools/interop/llama.py" "$@"
fi
exec "$py" "$root/tools/interop/check.py" "$@"
