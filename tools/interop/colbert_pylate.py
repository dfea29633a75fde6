"""PyLate parity of a ColBERT export (issue 40): loads OUT/model with
pylate.models.ColBERT(model_name_or_path=...), encodes the pairs of OUT/pairs.jsonl (written by
tools/interop/colbertgo) as PyLate does (queries with is_query=True: [Q] marker, [MASK]
expansion to query_length; passages with is_query=False: [D] marker, skiplist), scores each
pair by MaxSim (sum over query tokens of the largest dot product of the normalised vectors) and
compares with the Go scores: |ours - PyLate's| <= 1e-4 for every pair, and the same token counts;
and checks that the export's model.safetensors holds every tensor of transformers' BertModel
(the pooler included).

    python tools/interop/colbert_pylate.py OUT

Exit status 0 when every pair matches, 1 otherwise; 0 with a "skipped" line when pylate is not
installed (tools/pyenv/requirements-nodeps.txt).
"""
import json
import sys

TOL = 1e-4


def shim_sentence_transformers_6():
    """pylate 1.6.0 pins sentence-transformers <= 5.3; under the pinned 6.2 a Dense module's
    get_config_dict adds module_input_name / module_output_name, which PyLate's
    Dense.from_sentence_transformers passes on to its Dense(**config). Drop those two keys
    (the projection applies to token_embeddings in PyLate's Dense either way); nothing else of
    PyLate is changed."""
    from pylate.models.Dense import Dense as cls

    orig = cls.__init__

    def init(self, *a, module_input_name=None, module_output_name=None, **kw):
        orig(self, *a, **kw)

    cls.__init__ = init
    # ST 6 loads modules.json only when _get_model_type equals the class's model_type
    # ("SentenceTransformer"); PyLate 1.6.0 answers "ColBERT" (ST 5 compared class names), and
    # ST 6 then builds Transformer + Pooling from the weights. PyLate's _load_sbert_model, which
    # reads its keys from config_sentence_transformers.json, is not called by ST 6: main passes
    # them to the constructor instead.
    from pylate.models import ColBERT

    ColBERT._get_model_type = lambda self, *a, **kw: self.model_type
    # ST 5's _text_length (PyLate's encode sorts texts by it; ST 6 renamed it)
    if not hasattr(ColBERT, "_text_length"):
        ColBERT._text_length = lambda self, t: len(t) if isinstance(t, str) else sum(len(x) for x in t)


def shim_tokenize(tr):
    """ST 6's Transformer.tokenize ignores padding= (it pads to the longest), so PyLate's query
    expansion (padding="max_length" with [MASK] as the pad token) would not happen: restore ST 5's
    tokenize, the tokenizer called with padding, truncation "longest_first" and max_seq_length."""
    import types

    def tokenize(self, texts, padding=True, **kw):
        return self.tokenizer([t.strip() for t in texts], padding=padding, truncation="longest_first",
                              return_tensors="pt", max_length=self.max_seq_length)

    tr.tokenize = types.MethodType(tokenize, tr)


def main(out):
    try:
        import torch
        from pylate import models
    except ImportError as e:  # the check is optional: pylate comes from requirements-nodeps.txt
        print(f"interop colbert: skipped, pylate does not import ({e})")
        return 0
    torch.manual_seed(0)
    shim_sentence_transformers_6()
    pairs = [json.loads(line) for line in open(f"{out}/pairs.jsonl")]
    cfg = json.load(open(f"{out}/model/config_sentence_transformers.json"))
    keys = ["query_prefix", "document_prefix", "query_length", "document_length", "attend_to_expansion_tokens", "skiplist_words", "do_query_expansion"]
    m = models.ColBERT(model_name_or_path=f"{out}/model", device="cpu", **{k: cfg[k] for k in keys})
    shim_tokenize(m[0])
    print(f"pylate: query_prefix {m.query_prefix!r} (id {m.query_prefix_id}), document_prefix {m.document_prefix!r} (id {m.document_prefix_id}), "
          f"query_length {m.query_length}, document_length {m.document_length}, modules {[type(x).__name__ for x in m]}, vocabulary {len(m.tokenizer)}")
    m.eval()
    # every tensor of transformers' BertModel is in the export (the pooler, unused by ColBERT, is
    # carried from the BERT directory as the bi-encoder export carries it; PyLate reports a
    # missing one as MISSING when it loads)
    import transformers
    from safetensors import safe_open
    with safe_open(f"{out}/model/model.safetensors", "pt") as f:
        have = set(f.keys())
    want = set(transformers.BertModel(transformers.BertConfig.from_pretrained(f"{out}/model")).state_dict())
    missing = sorted(want - have)
    print(f"export: {len(have)} tensors in model.safetensors, {len(missing)} of BertModel's missing {missing}")
    q = m.encode([p["query"] for p in pairs], is_query=True, batch_size=16, convert_to_numpy=False)
    d = m.encode([p["passage"] for p in pairs], is_query=False, batch_size=16, convert_to_numpy=False)
    worst, bad = 0.0, 0
    for i, p in enumerate(pairs):
        qi, di = torch.as_tensor(q[i]).double(), torch.as_tensor(d[i]).double()
        if qi.shape[0] != p["query_tokens"] or di.shape[0] != p["passage_tokens"]:
            print(f"pair {i}: PyLate has {qi.shape[0]} query and {di.shape[0]} passage tokens, ours {p['query_tokens']} and {p['passage_tokens']}")
            bad += 1
            continue
        s = (qi @ di.T).max(dim=1).values.sum().item()
        diff = abs(s - p["score"])
        worst = max(worst, diff)
        if diff > TOL:
            bad += 1
            if bad <= 5:
                print(f"pair {i}: MaxSim ours {p['score']:.6f}, PyLate {s:.6f} (|diff| {diff:.2e})")
    print(f"interop colbert: {len(pairs)} pairs, max |MaxSim ours - PyLate| = {worst:.3e} (tolerance {TOL:g}); {bad} failing")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
