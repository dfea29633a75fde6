"""Interoperability of ragtrain's SPLADE export with sentence-transformers' SparseEncoder.

    bash tools/interop/run.sh splade pretrained/all-MiniLM-L6-v2   # the head initialised and perturbed
    bash tools/interop/run.sh splade --run RUN                      # a trained kind = "splade" run

tools/interop/gosplade writes the model as a SparseEncoder directory (export.WriteSparseEncoder)
and the Go vectors of 100 SciFact texts (50 claims, 50 title + abstract passages, drawn with a
fixed seed) pruned to their top-k terms (index.Prune: the k largest weights, ties by lower id);
this script loads the directory with sentence_transformers.SparseEncoder, encodes the same texts
(encode_document: max_seq_length from the export), prunes them the same way and checks, per
text, that the non-zero terms after pruning are the same and the values within 1e-4. Exit
status 1 when a check fails.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def prune(vec, k):
    """index.Prune: positive weights, the k largest (ties by lower id), sorted by id."""
    nz = [(i, float(v)) for i, v in enumerate(vec) if v > 0]
    if k > 0 and len(nz) > k:
        nz.sort(key=lambda t: (-t[1], t[0]))
        nz = sorted(nz[:k])
    return nz


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("init", nargs="?", default="", help="a BERT directory (with --run unset)")
    ap.add_argument("--run", default="", help="a kind = splade run directory")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "scifact"))
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--top-k", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    import torch
    from sentence_transformers import SparseEncoder

    torch.set_num_threads(2)
    rng = random.Random(40)
    corpus = read_jsonl(os.path.join(args.data, "corpus.jsonl"))
    queries = read_jsonl(os.path.join(args.data, "queries.jsonl"))
    texts = [q["text"] for q in rng.sample(queries, args.n // 2)]
    texts += [c.get("title", "") + " " + c.get("text", "") for c in rng.sample(corpus, args.n - args.n // 2)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "texts.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        cmd = ["go", "run", "./tools/interop/gosplade", "-texts", path, "-out", tmp, "-top-k", str(args.top_k)]
        cmd += ["-run", args.run] if args.run else ["-init", args.init]
        subprocess.run(cmd, cwd=ROOT, check=True)
        gov = read_jsonl(os.path.join(tmp, "vectors.jsonl"))
        model = SparseEncoder(os.path.join(tmp, "model"), device="cpu")
        emb = model.encode_document(texts, convert_to_tensor=True, batch_size=8)
        emb = emb.to_dense() if emb.is_sparse else emb
        emb = emb.cpu().numpy()
    bad_terms, max_diff, boundary = 0, 0.0, 0
    for i, (g, v) in enumerate(zip(gov, emb)):
        py = prune(v, args.top_k)
        pids = [t for t, _ in py]
        if pids != g["ids"]:
            # a near-tie at the top-k boundary or a weight at 0 may flip between float paths:
            # counted apart when every differing term's weight is within tol of the cut
            diff = set(pids) ^ set(g["ids"])
            cut = min([w for _, w in py] or [0.0])
            if all(abs(float(v[t]) - cut) <= args.tol or float(v[t]) <= args.tol for t in diff):
                boundary += 1
            else:
                bad_terms += 1
                if bad_terms <= 3:
                    print(f"text {i}: {len(diff)} terms differ, e.g. {sorted(diff)[:5]}", file=sys.stderr)
        for t, w in zip(g["ids"], g["values"]):
            max_diff = max(max_diff, abs(float(v[t]) - w))
    nnz = sum(len(g["ids"]) for g in gov) / len(gov)
    print(f"splade: {len(texts)} texts, {nnz:.1f} terms each after pruning (top {args.top_k}); "
          f"texts whose term sets differ: {bad_terms} (+{boundary} at a near-tie of the cut, within {args.tol}); "
          f"max abs value difference {max_diff:.3g} (want <= {args.tol})")
    ok = bad_terms == 0 and max_diff <= args.tol
    print("splade interop:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
