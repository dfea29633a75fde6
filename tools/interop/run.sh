#!/usr/bin/env bash
# Interoperability checks against the real sentence-transformers / transformers / tokenizers
# (tools/interop/check.py says what each checks). Creates the repository's venv first.
#
#   bash tools/interop/run.sh bi pretrained/all-MiniLM-L6-v2
#   bash tools/interop/run.sh bi EXPORT_DIR          # a fine-tuned model after `train export`
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$(bash "$root/tools/pyenv/setup.sh")"
exec "$py" "$root/tools/interop/check.py" "$@"
