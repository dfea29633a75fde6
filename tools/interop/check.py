"""Interoperability of ragtrain's Go bi-encoders with the real Python libraries.

    bash tools/interop/run.sh bi pretrained/all-MiniLM-L6-v2      # or an export of `train export`

For the model directory DIR and the SciFact collection it checks, and prints:
  1. token ids: the Go tokenizer (DIR's tokenizer, as model.init_from reads it) against
     Hugging Face's AutoTokenizer(DIR) on every SciFact passage (title + " " + text) and every
     query, untruncated: the number of texts whose ids differ (want 0);
  2. embeddings: the Go vectors (tools/interop/goenc) against SentenceTransformer(DIR).encode()
     on a sample (the 64 longest passages, 192 passages and 64 queries drawn with a fixed seed),
     at L = DIR's max_seq_length: the max abs difference (want <= 1e-4).
Exit status 1 when a check fails.
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

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def goenc(model, texts, out, ids_only, max_length=0):
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "texts.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    cmd = ["go", "run", "./tools/interop/goenc", "-model", model, "-texts", path, "-out", out]
    if ids_only:
        cmd.append("-ids-only")
    if max_length:
        cmd += ["-max-length", str(max_length)]
    subprocess.run(cmd, cwd=ROOT, check=True)
    ids = [json.loads(line) for line in open(os.path.join(out, "ids.jsonl"))]
    vecs = None if ids_only else np.load(os.path.join(out, "vectors.npy"))
    return ids, vecs


def check_bi(args):
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    torch.set_num_threads(2)
    corpus = read_jsonl(os.path.join(args.data, "corpus.jsonl"))
    passages = [c.get("title", "") + " " + c.get("text", "") for c in corpus]
    queries = [q["text"] for q in read_jsonl(os.path.join(args.data, "queries.jsonl"))]
    texts = passages + queries
    tmp = tempfile.mkdtemp(prefix="interop-")
    ok = True

    go_ids, _ = goenc(args.model, texts, os.path.join(tmp, "all"), ids_only=True)
    hf = AutoTokenizer.from_pretrained(args.model)
    hf_ids = hf(texts, add_special_tokens=True, truncation=False)["input_ids"]
    bad = [i for i in range(len(texts)) if list(hf_ids[i]) != go_ids[i]]
    print(f"token ids: {len(bad)} of {len(texts)} texts differ ({len(passages)} passages, {len(queries)} queries; "
          f"Go tokenizer vs transformers {type(hf).__name__} of {args.model})")
    for i in bad[:3]:
        print(f"  text {i}: {texts[i][:80]!r}\n    hf {list(hf_ids[i])[:40]}\n    go {go_ids[i][:40]}")
    ok &= not bad

    st = SentenceTransformer(args.model, device="cpu")
    rng = random.Random(13)
    by_len = sorted(range(len(passages)), key=lambda i: -len(go_ids[i]))
    sample_p = by_len[:64] + rng.sample(by_len[64:], 192)
    sample = [passages[i] for i in sample_p] + rng.sample(queries, 64)
    _, go_vecs = goenc(args.model, sample, os.path.join(tmp, "sample"), ids_only=False, max_length=st.max_seq_length)
    st_vecs = st.encode(sample, batch_size=32, convert_to_numpy=True)
    diff = float(np.abs(go_vecs - st_vecs).max())
    print(f"embeddings: max abs diff {diff:.3g} over {len(sample)} texts ({len(sample) - 64} passages incl. the 64 longest, 64 queries), "
          f"L {st.max_seq_length}, Go vs sentence-transformers encode() of {args.model}; modules {[type(m).__name__ for m in st]}")
    ok &= diff <= 1e-4
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["bi"])
    ap.add_argument("model")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "scifact"))
    args = ap.parse_args()
    args.model = os.path.abspath(args.model)
    ok = check_bi(args)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
