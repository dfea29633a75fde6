"""The sentence-transformers peer of a ragtrain retriever run (recipes/scifact-minilm.toml).

It repeats the run's fine-tuning in sentence-transformers, on the same inputs: the same
pretrained checkpoint (model.init_from), the same mined training examples (the run's
train_examples.jsonl: claim, cited abstract, hard negatives), MultipleNegativesRankingLoss
(InfoNCE over in-batch and hard negatives, scale = 1 / loss.temperature, cosine), and the
run's batch size, learning rate, warm-up, linear schedule, weight decay, gradient clipping,
steps, max lengths and seed; the checkpoint is chosen on the dev split at the run's
checkpoint steps by the same metric, then ranked on test. It writes TREC runs
(<out>/<split>.<system>.trec, systems zeroshot and finetuned) and <out>/peer.json (metrics
computed here, wall times); score the runs with the toolkit's own metrics:

    bash tools/peer/run.sh RUN_DIR          # creates the venv, runs this, scores both sides

Differences that remain (documented, not hidden): sentence-transformers draws its own batches
(BatchSamplers.NO_DUPLICATES, seeded) where ragtrain deals seeded epochs with judged-relevant
in-batch passages masked; PyTorch's dropout masks differ from ours.
"""
import argparse
import json
import math
import os
import sys
import time
import tomllib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            qrels.setdefault(q, {})[d] = int(s)
    return qrels


def ndcg_at(ranked, judged, k):
    """nDCG@k with graded gains = qrels scores (trec_eval's ndcg_cut, as package eval)."""
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((s for s in judged.values() if s > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="the ragtrain run directory (recipe.resolved.toml, train_examples.jsonl)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--zeroshot-only", action="store_true", help="rank the test split with the pretrained model only (no training)")
    args = ap.parse_args()

    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.training_args import BatchSamplers
    from transformers import TrainerCallback
    from datasets import Dataset

    torch.set_num_threads(args.threads)
    with open(os.path.join(args.run, "recipe.resolved.toml"), "rb") as f:
        rec = tomllib.load(f)
    os.makedirs(args.out, exist_ok=True)
    seed = rec["seed"]
    data_dir = rec["data"]["dir"]
    title = rec["data"]["title_field"]
    tr = rec["train"]
    ev = rec["eval"]
    L = rec["tokenizer"]["max_length"]
    torch.manual_seed(seed)

    corpus = read_jsonl(os.path.join(data_dir, "corpus.jsonl"))
    ids = [c["_id"] for c in corpus]
    texts = [(c.get("title", "") + " " + c.get("text", "")) if title else c.get("text", "") for c in corpus]
    queries = {q["_id"]: q["text"] for q in read_jsonl(os.path.join(data_dir, "queries.jsonl"))}
    dev_split, test_split = rec["data"]["dev_split"], rec["data"]["test_split"]
    qrels = {s: read_qrels(os.path.join(data_dir, "qrels", s + ".tsv")) for s in (dev_split, test_split)}

    model = SentenceTransformer(rec["model"]["init_from"], device="cpu")
    model.max_seq_length = L
    depth = ev["depth"]

    def rank(split):
        qids = sorted(qrels[split], key=lambda x: (not x.isdigit(), int(x) if x.isdigit() else 0, x))
        p = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        q = model.encode([queries[x] for x in qids], batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
        s = q @ p.T
        top = np.argsort(-s, axis=1, kind="stable")[:, :depth]
        return {qid: [(ids[j], float(s[i, j])) for j in top[i]] for i, qid in enumerate(qids)}

    def ndcg10(run, split):
        vals = [ndcg_at([d for d, _ in run[q]], qrels[split][q], 10) for q in run if any(v > 0 for v in qrels[split][q].values())]
        return float(np.mean(vals))

    def write_trec(run, split, system):
        with open(os.path.join(args.out, f"{split}.{system}.trec"), "w") as f:
            for q, hits in run.items():
                for r, (d, sc) in enumerate(hits, 1):
                    f.write(f"{q} Q0 {d} {r} {sc:.6f} {system}\n")

    report = {"seed": seed, "threads": args.threads, "torch": torch.__version__}
    t0 = time.time()
    zs = rank(test_split)
    report["zeroshot_encode_seconds"] = time.time() - t0
    write_trec(zs, test_split, "zeroshot")
    report["zeroshot/nDCG@10"] = ndcg10(zs, test_split)
    print(f"zeroshot {test_split} nDCG@10 {report['zeroshot/nDCG@10']:.4f}", flush=True)
    if args.zeroshot_only:
        with open(os.path.join(args.out, "peer.json"), "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
        print(args.out)
        return 0

    rows = {"anchor": [], "positive": []}
    examples = read_jsonl(os.path.join(args.run, "train_examples.jsonl"))
    n_neg = len(examples[0]["negatives"])
    for i in range(n_neg):
        rows[f"negative_{i + 1}"] = []
    for ex in examples:
        rows["anchor"].append(ex["query"])
        rows["positive"].append(ex["positive"])
        for i in range(n_neg):
            rows[f"negative_{i + 1}"].append(ex["negatives"][i])
    train = Dataset.from_dict(rows)
    loss = MultipleNegativesRankingLoss(model, scale=1.0 / rec["loss"]["temperature"])

    select_every = tr["checkpoint_every"] or tr["steps"]
    best = {"value": -1.0, "step": 0, "state": None}

    class Select(TrainerCallback):
        def on_step_end(self, targs, state, control, **kw):
            step = state.global_step
            if step % select_every == 0 or step == tr["steps"]:
                model.eval()
                v = ndcg10(rank(dev_split), dev_split)
                model.train()
                mark = ""
                if v > best["value"]:
                    best.update(value=v, step=step, state={k: t.detach().clone() for k, t in model.state_dict().items()})
                    mark = " (best so far)"
                print(f"select: step {step}: {dev_split} nDCG@10 = {v:.4f}{mark}", flush=True)

    targs = SentenceTransformerTrainingArguments(
        output_dir=os.path.join(args.out, "trainer"), per_device_train_batch_size=tr["batch_size"], max_steps=tr["steps"],
        learning_rate=tr["lr"], warmup_steps=tr["warmup_steps"], lr_scheduler_type=tr["schedule"], weight_decay=tr["weight_decay"],
        max_grad_norm=tr["grad_clip"], seed=seed, data_seed=seed, batch_sampler=BatchSamplers.NO_DUPLICATES,
        save_strategy="no", logging_steps=tr["log_every"], report_to=[], use_cpu=True, dataloader_drop_last=True,
        dataloader_num_workers=0)
    trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=train, loss=loss, callbacks=[Select()])
    t0 = time.time()
    trainer.train()
    report["train_seconds_with_selection"] = time.time() - t0
    model.load_state_dict(best["state"])
    report["select/step"] = best["step"]
    report["select/dev/nDCG@10"] = best["value"]
    ft = rank(test_split)
    write_trec(ft, test_split, "finetuned")
    report["finetuned/nDCG@10"] = ndcg10(ft, test_split)
    print(f"finetuned {test_split} nDCG@10 {report['finetuned/nDCG@10']:.4f} (step {best['step']})", flush=True)
    model.save(os.path.join(args.out, "model"))
    with open(os.path.join(args.out, "peer.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    print(args.out)


if __name__ == "__main__":
    sys.exit(main())
