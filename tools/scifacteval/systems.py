"""Writes the predictions of five systems over SciFact gold claims, for check.sh to score with
both the official script and tools/scifacteval (the figures must agree).

  python systems.py --gold CLAIMS.jsonl --corpus BEIR_CORPUS.jsonl --out DIR

Writes DIR/<system>.jsonl (SciFact format, one line per claim) and DIR/corpus.jsonl, the BEIR
corpus in the layout the official GoldDataset reads ({"doc_id", "title", "abstract"}: the
text as a single sentence; the official metrics only look the documents up by id).

Systems:
  oracle           the gold evidence: each gold abstract, its label, all its evidence sentences
  flipped          the gold abstracts with every label flipped and the rationale cut to its
                   first sentence
  random           seed 42: 0-3 abstracts per claim, each a cited abstract or a random corpus one,
                   a random label, 0-5 distinct random sentences among the first 12
  support_cited    SUPPORT on every cited abstract, rationale sentences 0-3 (four: over the cap)
  gold_overpredict the gold abstracts and labels, the gold sentences plus two random others,
                   shuffled (seed 7), so the cap of 3 cuts gold sets at random
"""
import argparse
import json
import os
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gold", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    claims = [json.loads(l) for l in open(a.gold) if l.strip()]
    doc_ids = []
    with open(a.corpus) as f, open(os.path.join(a.out, "corpus.jsonl"), "w") as w:
        for l in f:
            d = json.loads(l)
            doc_ids.append(int(d["_id"]))
            w.write(json.dumps({"doc_id": int(d["_id"]), "title": d["title"], "abstract": [d["text"]]}) + "\n")

    def gold_sents(sets):
        return [s for st in sets for s in st["sentences"]]

    flip = {"SUPPORT": "CONTRADICT", "CONTRADICT": "SUPPORT"}
    rnd, rnd2 = random.Random(42), random.Random(7)
    systems = {k: [] for k in ["oracle", "flipped", "random", "support_cited", "gold_overpredict"]}
    for c in claims:
        ev = c["evidence"]
        systems["oracle"].append({d: {"sentences": gold_sents(s), "label": s[0]["label"]} for d, s in ev.items()})
        systems["flipped"].append({d: {"sentences": gold_sents(s)[:1], "label": flip[s[0]["label"]]} for d, s in ev.items()})
        r = {}
        for _ in range(rnd.randint(0, 3)):
            d = str(rnd.choice(c["cited_doc_ids"]) if rnd.random() < 0.5 else rnd.choice(doc_ids))
            r[d] = {"sentences": rnd.sample(range(12), rnd.randint(0, 5)), "label": rnd.choice(["SUPPORT", "CONTRADICT"])}
        systems["random"].append(r)
        systems["support_cited"].append({str(d): {"sentences": [0, 1, 2, 3], "label": "SUPPORT"} for d in c["cited_doc_ids"]})
        o = {}
        for d, s in ev.items():
            g = gold_sents(s)
            extra = rnd2.sample([i for i in range(max(g) + 4) if i not in g], 2)
            ss = g + extra
            rnd2.shuffle(ss)
            o[d] = {"sentences": ss, "label": s[0]["label"]}
        systems["gold_overpredict"].append(o)
    for name, preds in systems.items():
        with open(os.path.join(a.out, name + ".jsonl"), "w") as w:
            for c, p in zip(claims, preds):
                w.write(json.dumps({"id": c["id"], "evidence": p}) + "\n")


if __name__ == "__main__":
    main()
