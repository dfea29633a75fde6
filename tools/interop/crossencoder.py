#!/usr/bin/env python3
"""Does sentence-transformers score an exported ragtrain cross-encoder as the Go model does?

    go run ./cmd/train export -run RUN/reranker-<loss> -out EXPORT
    go run ./tools/interop/gen -model EXPORT -data datasets/scifact -split test -out pairs.jsonl
    .venv/bin/python tools/interop/crossencoder.py EXPORT pairs.jsonl [--tol 1e-4]

Unlike tools/parity/parity.py (a re-implementation of the forward pass on Go's token ids), this
loads EXPORT the way a user of the Python ecosystem does, with nothing of this repository:
sentence_transformers.CrossEncoder(EXPORT) (transformers' BertForSequenceClassification and the
export's own tokenizer files) and CrossEncoder.predict on the raw (query, passage) texts. Each
line of pairs.jsonl (tools/interop/gen) holds the query, the passage, the Go token ids of the
pair and the Go score (the logit). It prints the maximum absolute difference of the scores, how
many pairs Hugging Face's tokenizer encodes to other ids than Go's (with the first such pair),
and exits 1 when the difference exceeds --tol or a pair is tokenized differently.
"""

import argparse
import json
import sys

import numpy as np
import torch
from sentence_transformers import CrossEncoder
from transformers import AutoTokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", help="cross-encoder export directory (train export)")
    ap.add_argument("pairs", help="JSONL of {query, passage, ids, score} (tools/interop/gen)")
    ap.add_argument("--tol", type=float, default=1e-4, help="largest accepted |python - go| (default 1e-4)")
    ap.add_argument("--batch-size", type=int, default=16)
    a = ap.parse_args()

    with open(a.pairs, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        sys.exit(f"{a.pairs}: no pairs")
    torch.manual_seed(0)
    model = CrossEncoder(a.export, device="cpu")
    pairs = [(r["query"], r["passage"]) for r in rows]
    got = np.asarray(model.predict(pairs, batch_size=a.batch_size, show_progress_bar=False), dtype=np.float64).reshape(-1)
    want = np.asarray([r["score"] for r in rows], dtype=np.float64)
    diff = np.abs(got - want)
    worst = int(diff.argmax())

    tok = AutoTokenizer.from_pretrained(a.export)
    max_length = getattr(model, "max_seq_length", None) or model.max_length
    other = []
    for i, r in enumerate(rows):
        ids = tok(r["query"], r["passage"], truncation=True, max_length=max_length)["input_ids"]
        if list(ids) != r["ids"]:
            other.append(i)

    print(f"{a.export}: {len(rows)} pairs, max_length {max_length}, scores from {want.min():.4f} to {want.max():.4f}")
    print(f"max |sentence-transformers - go| = {diff.max():.3g} (pair {worst}: {got[worst]:.6f} vs {want[worst]:.6f}); mean {diff.mean():.3g}")
    print(f"tokenization: {len(rows) - len(other)} of {len(rows)} pairs encode to Go's ids")
    ok = diff.max() <= a.tol and not other
    if other:
        i = other[0]
        ids = tok(rows[i]["query"], rows[i]["passage"], truncation=True, max_length=max_length)["input_ids"]
        print(f"  first differing pair {i}: query {rows[i]['query'][:60]!r}: {len(ids)} ids here, {len(rows[i]['ids'])} in Go")
    print("PASS" if ok else f"FAIL (tol {a.tol:g})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
