"""Package gguf's dequantization against the Python gguf package (gguf-py, ggml's own reader).

    .venv/bin/python tools/interop/gguf_dequant.py [--gguf FILE]

Runs `go run ./tools/interop/ggquant -gguf FILE` (one line per tensor: shape and the sha256 of
the dequantized float32 values) and compares each tensor with gguf.quants.dequantize of the
same bytes read by gguf.GGUFReader: same shape and bit-identical values. Prints the counts per
type and exits 1 on any difference. Default FILE: SmolLM2-135M-Instruct.Q4_1.gguf from
tools/pretrained/get.sh (1 Q8_0, 210 Q4_1, 61 F32 tensors).
"""
import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    a = ap.parse_args()
    out = subprocess.run(["go", "run", "./tools/interop/ggquant", "-gguf", os.path.abspath(a.gguf)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    ours = {o["name"]: o for o in map(json.loads, out.splitlines())}
    reader = GGUFReader(a.gguf)
    same, diff = collections.Counter(), collections.Counter()
    for t in reader.tensors:
        o = ours.get(t.name)
        if o is None:
            print(f"{t.name}: {t.tensor_type.name} not dequantized by package gguf")
            diff[t.tensor_type.name] += 1
            continue
        x = dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = [int(d) for d in reversed(t.shape)]
        x = x.reshape(shape)
        h = hashlib.sha256(np.ascontiguousarray(x).astype("<f4").tobytes()).hexdigest()
        if h == o["sha256"] and shape == o["shape"]:
            same[o["type"]] += 1
        else:
            diff[o["type"]] += 1
            print(f"{t.name}: shape {o['shape']} vs {shape}, sum {o['sum']} vs {float(x.astype(np.float64).sum())}")
    print("bit-identical tensors by type:", dict(same))
    print("different:", dict(diff) or 0)
    sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
