#!/usr/bin/env bash
# Create (or reuse) the repository's Python virtual environment, .venv/ at the repository root
# (git-ignored), with the pinned packages of tools/pyenv/requirements.txt. The Go product never
# needs it; the interoperability checks, the sentence-transformers peer and the pretrained
# checkpoint set-up do. Prints the venv's python path last.
#
#   bash tools/pyenv/setup.sh            # install what is missing
#   VENV=/some/dir bash tools/pyenv/setup.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${VENV:-$root/.venv}"
req="$root/tools/pyenv/requirements.txt"
nodeps="$root/tools/pyenv/requirements-nodeps.txt"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
stamp="$venv/.ragtrain-requirements"
# the stamp is both files' contents: a venv made before a pin changed in either is brought up to date
if [ -f "$stamp" ] && cat "$req" "$nodeps" | cmp -s "$stamp" -; then
  echo "$venv/bin/python"
  exit 0
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r "$req" >&2
# packages whose declared dependencies would move the pins above (requirements-nodeps.txt)
"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off --no-deps -r "$nodeps" >&2
cat "$req" "$nodeps" >"$stamp"
echo "$venv/bin/python"
