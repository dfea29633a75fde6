#!/usr/bin/env python3
"""Parity of an exported model with the Go model that trained it.

    go run ./cmd/train export -run RUN_DIR -out EXPORT
    go run ./tools/parity/gen -run RUN_DIR -out GO_OUT
    python3 tools/parity/parity.py EXPORT GO_OUT [--tol 1e-4] [--float64]

The script reads EXPORT the way a PyTorch serving stack would, with nothing of this repository:
its own safetensors and .npy readers, and plain re-implementations of the forward passes from
the papers and the Hugging Face layouts (the transformers library is not needed):

  * BERT (Devlin et al. 2019) as transformers' BertModel computes it: word + position +
    token-type embeddings, LayerNorm, then post-LN blocks of multi-head self-attention (padding
    keys masked) and an exact-erf GELU feed-forward layer; sentence-transformers pooling
    (masked mean or [CLS]) from 1_Pooling/config.json;
  * the ragtrain "bow" layout: the masked mean of the word embeddings, then dense (x W^T + b);
  * BertForSequenceClassification with num_labels 1 (a cross-encoder): BertModel on
    "[CLS] query [SEP] passage [SEP]" with token types, the pooler tanh(dense(h_[CLS])), then
    the classifier: one score per pair;
  * GPT2LMHeadModel (Radford et al. 2019) as transformers computes it: wte + wpe, pre-LN blocks
    x + attn(ln_1(x)), x + mlp(ln_2(x)) with the fused Conv1D c_attn ([H, 3H], x W + b), causal
    and padding masks, ln_f, and the lm_head tied to wte: next-token log-probabilities at every
    position.
    A Self-RAG reader (kind "selfrag") is the same GPT2LMHeadModel with a vocabulary grown by
    the reflection tokens; its log-probs are also reported on the reflection-token columns and
    at the positions whose next token is a reflection token.

It runs them on the token ids GO_OUT holds and prints, for every output, the maximum absolute
difference from the Go vectors; it exits 1 when one exceeds the tolerance (1e-4 by default).
With --float64 the reference is computed in float64 (the weights are float32 either way).

Needs only Python 3 and torch (Debian: apt-get install python3-torch). KINDS maps the kind of
ragtrain.json to its compare_* function.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch

# ---------------------------------------------------------------- file formats

ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


def read_safetensors(path):
    """Returns ({name: tensor}, metadata) of a safetensors file
    (https://github.com/huggingface/safetensors: u64 LE header length, JSON header, data)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        sys.exit(f"{path}: {len(buf)} bytes, shorter than the header length (truncated?)")
    (n,) = struct.unpack("<Q", buf[:8])
    if 8 + n > len(buf):
        sys.exit(f"{path}: header length {n} runs past the end of the {len(buf)}-byte file")
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = memoryview(buf)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, e in header.items():
        dtype = ST_DTYPES.get(e["dtype"])
        if dtype is None:
            sys.exit(f"{path}: tensor {name!r}: dtype {e['dtype']} not supported here")
        begin, end = e["data_offsets"]
        if end > len(data):
            sys.exit(f"{path}: tensor {name!r}: data_offsets {begin, end} run past the data (truncated?)")
        shape = e["shape"]
        if begin == end:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype).reshape(shape)
        if t.numel() * t.element_size() != end - begin:
            sys.exit(f"{path}: tensor {name!r}: {end - begin} bytes for shape {shape}")
        out[name] = t
    return out, meta


NPY_DTYPES = {"<f4": torch.float32, "<f8": torch.float64, "<i8": torch.int64, "<i4": torch.int32}


def read_npy(path):
    """Reads a C-order .npy file (format versions 1.0-3.0) into a tensor."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    major = buf[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", buf[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", buf[8:12])
        start = 12
    import ast
    header = ast.literal_eval(buf[start:start + hlen].decode("latin1"))
    if header["fortran_order"]:
        sys.exit(f"{path}: fortran_order arrays are not supported")
    dtype = NPY_DTYPES.get(header["descr"])
    if dtype is None:
        sys.exit(f"{path}: dtype {header['descr']} not supported here")
    shape = list(header["shape"])
    body = buf[start + hlen:]
    if not body:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(body), dtype=dtype).reshape(shape)


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------- models

def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def linear(x, w, b):
    return x @ w.T + b


def gelu(x):
    # BERT's and GPT-2's exact GELU: 0.5 x (1 + erf(x / sqrt 2))
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class Bert:
    """transformers.BertModel's encoder (no pooler), from a model directory."""

    def __init__(self, directory, dtype):
        self.cfg = read_json(os.path.join(directory, "config.json"))
        c = self.cfg
        if c.get("model_type") != "bert":
            sys.exit(f"{directory}/config.json: model_type {c.get('model_type')!r}, want 'bert'")
        for key, want in (("hidden_act", "gelu"), ("position_embedding_type", "absolute")):
            if c.get(key, want) != want:
                sys.exit(f"{directory}/config.json: {key} = {c[key]!r}; this script implements {want!r}")
        w, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
        if any(k.startswith("bert.") for k in w):
            w = {k[5:] if k.startswith("bert.") else k: v for k, v in w.items()}
        self.w = {k: v.to(dtype) for k, v in w.items() if v.is_floating_point()}
        self.heads = c["num_attention_heads"]
        self.layers = c["num_hidden_layers"]
        self.eps = c.get("layer_norm_eps", 1e-12)

    def tokens(self, ids, mask, types):
        """Token states [B, L, H] for ids, mask, types [B, L]."""
        w, B, L = self.w, ids.shape[0], ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][torch.arange(L)][None]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        H = x.shape[-1]
        nh, dh = self.heads, H // self.heads
        # additive mask as transformers builds it: 0 for real keys, the dtype's minimum for padding
        ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(name, inp):
                return linear(inp, w[p + name + ".weight"], w[p + name + ".bias"])

            def split(t):
                return t.view(B, L, nh, dh).transpose(1, 2)

            q, k, v = (split(lin("attention.self." + n, x)) for n in ("query", "key", "value"))
            scores = q @ k.transpose(-1, -2) / math.sqrt(dh) + ext
            ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, L, H)
            a = layer_norm(lin("attention.output.dense", ctx) + x,
                           w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            h = gelu(lin("intermediate.dense", a))
            x = layer_norm(lin("output.dense", h) + a,
                           w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        return x


    def classify(self, ids, mask, types):
        """BertForSequenceClassification's logits [B] (num_labels 1): pooler, then classifier."""
        w = self.w
        h = self.tokens(ids, mask, types)[:, 0]
        u = torch.tanh(linear(h, w["pooler.dense.weight"], w["pooler.dense.bias"]))
        if w["classifier.weight"].shape[0] != 1:
            sys.exit(f"classifier.weight {list(w['classifier.weight'].shape)}: this script compares num_labels 1")
        return linear(u, w["classifier.weight"], w["classifier.bias"])[:, 0]


def gelu_new(x):
    # GPT-2's tanh approximation (transformers' "gelu_new")
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class GPT2:
    """transformers.GPT2LMHeadModel, from a model directory."""

    ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu_new}

    def __init__(self, directory, dtype):
        c = read_json(os.path.join(directory, "config.json"))
        if c.get("model_type") != "gpt2":
            sys.exit(f"{directory}/config.json: model_type {c.get('model_type')!r}, want 'gpt2'")
        act = c.get("activation_function", "gelu_new")
        if act not in self.ACTIVATIONS:
            sys.exit(f"{directory}/config.json: activation_function {act!r} is not implemented here")
        for key, want in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                          ("add_cross_attention", False)):
            if c.get(key, want) != want:
                sys.exit(f"{directory}/config.json: {key} = {c[key]!r}; this script implements {want!r}")
        self.act = self.ACTIVATIONS[act]
        w, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
        if not any(k.startswith("transformer.") for k in w):  # GPT2Model names
            w = {(k if k == "lm_head.weight" else "transformer." + k): v for k, v in w.items()}
        self.w = {k: v.to(dtype) for k, v in w.items() if v.is_floating_point()}
        # tie_word_embeddings (default true): lm_head.weight is wte, whether or not the file has it
        if c.get("tie_word_embeddings", True) or "lm_head.weight" not in self.w:
            self.w["lm_head.weight"] = self.w["transformer.wte.weight"]
        self.heads, self.layers = c["n_head"], c["n_layer"]
        self.eps = c.get("layer_norm_epsilon", 1e-5)

    def log_probs(self, ids, mask):
        """Next-token log-probabilities [B, L, V] for ids, mask [B, L] (right padding)."""
        w, B, L = self.w, ids.shape[0], ids.shape[1]
        x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][torch.arange(L)][None]
        H = x.shape[-1]
        nh, dh = self.heads, H // self.heads
        neg = torch.finfo(x.dtype).min
        causal = torch.tril(torch.ones(L, L, dtype=torch.bool))
        ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * neg
        for i in range(self.layers):
            p = f"transformer.h.{i}."

            def conv1d(name, inp):  # Conv1D: x W + b, W [in, out]
                return inp @ w[p + name + ".weight"] + w[p + name + ".bias"]

            def split(t):
                return t.view(B, L, nh, dh).transpose(1, 2)

            h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], self.eps)
            q, k, v = (split(t) for t in conv1d("attn.c_attn", h).split(H, dim=2))
            scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
            scores = torch.where(causal, scores, torch.tensor(neg, dtype=x.dtype)) + ext
            ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, L, H)
            x = x + conv1d("attn.c_proj", ctx)
            h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], self.eps)
            x = x + conv1d("mlp.c_proj", self.act(conv1d("mlp.c_fc", h)))
        x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], self.eps)
        return torch.log_softmax(x @ w["lm_head.weight"].T, dim=-1)


def st_pool(directory, states, mask):
    """sentence-transformers Pooling as 1_Pooling/config.json configures it (mean or cls)."""
    c = read_json(os.path.join(directory, "1_Pooling", "config.json"))
    if c.get("pooling_mode_cls_token"):
        return states[:, 0]
    if c.get("pooling_mode_mean_tokens"):
        m = mask.to(states.dtype).unsqueeze(-1)
        return (states * m).sum(1) / m.sum(1).clamp(min=1e-9)
    sys.exit(f"{directory}/1_Pooling/config.json: only mean_tokens and cls_token pooling are implemented")


class Bow:
    """The ragtrain bow layout: mean of word embeddings over real tokens, then dense."""

    def __init__(self, directory, dtype):
        c = read_json(os.path.join(directory, "config.json"))
        if c.get("model_type") != "ragtrain-bow" or c.get("pooling") != "mean":
            sys.exit(f"{directory}/config.json: not a ragtrain-bow mean-pooled tower")
        w, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
        self.w = {k: v.to(dtype) for k, v in w.items()}

    def encode(self, ids, mask):
        e = self.w["embeddings.word_embeddings.weight"][ids]
        m = mask.to(e.dtype).unsqueeze(-1)
        mean = (e * m).sum(1) / m.sum(1)
        return linear(mean, self.w["dense.weight"], self.w["dense.bias"])


def encode_tower(directory, encoder, ids, mask, types, dtype):
    if encoder == "transformer":
        return st_pool(directory, Bert(directory, dtype).tokens(ids, mask, types), mask)
    if encoder == "bow":
        return Bow(directory, dtype).encode(ids, mask)
    sys.exit(f"encoder {encoder!r} is not implemented here")


# ---------------------------------------------------------------- comparisons

def report(name, ref, other, results, other_name="go"):
    if ref.shape != other.shape:
        print(f"{name:<34} shape {list(ref.shape)} vs {other_name} {list(other.shape)}: FAIL")
        results.append(math.inf)
        return
    d = (ref.double() - other.double()).abs().max().item() if ref.numel() else 0.0
    print(f"{name:<34} {str(list(ref.shape)):<12} max |torch - {other_name}| = {d:.3e}")
    results.append(d)


def compare_bi_encoder(export, manifest, go, dtype):
    results = []
    with torch.no_grad():
        vecs = {}
        for role in ("query", "passage"):
            tower = os.path.join(export, manifest["towers"][role])
            ids = read_npy(os.path.join(go, role + "_ids.npy"))
            mask = read_npy(os.path.join(go, role + "_mask.npy"))
            types = read_npy(os.path.join(go, role + "_types.npy"))
            ref = encode_tower(tower, manifest["encoder"], ids, mask, types, dtype)
            vecs[role] = ref
            report(f"{role} embeddings ({manifest['towers'][role]})", ref, read_npy(os.path.join(go, role + "_go.npy")), results)
        emb = manifest.get("embeddings")
        if emb:
            rows = read_npy(os.path.join(export, emb, "embeddings.npy"))
            with open(os.path.join(export, emb, "ids.txt")) as f:
                row = {line.rstrip("\n"): i for i, line in enumerate(f)}
            emb_manifest = read_json(os.path.join(export, emb, "manifest.json"))
            want = read_json(os.path.join(go, "inputs.json"))["passage_ids"]
            ref = vecs["passage"]
            if emb_manifest["normalized"]:
                ref = torch.nn.functional.normalize(ref, dim=-1)
            report(f"{emb}/embeddings.npy rows", ref, rows[[row[i] for i in want]], results, "npy")
    return results


def compare_cross_encoder(export, manifest, go, dtype):
    results = []
    with torch.no_grad():
        ids, mask, types = (read_npy(os.path.join(go, f"pair_{n}.npy")) for n in ("ids", "mask", "types"))
        ref = Bert(export, dtype).classify(ids, mask, types)
        report("cross-encoder scores", ref, read_npy(os.path.join(go, "pair_go.npy")), results)
    return results


def compare_rag(export, manifest, go, dtype):
    results = []
    with torch.no_grad():
        ids, mask = read_npy(os.path.join(go, "reader_ids.npy")), read_npy(os.path.join(go, "reader_mask.npy"))
        ref = GPT2(os.path.join(export, manifest.get("reader", ".")), dtype).log_probs(ids, mask)
        real = mask.bool()
        go_lp = read_npy(os.path.join(go, "reader_logprobs_go.npy"))
        report("reader log-probs, real positions", ref[real], go_lp[real], results)
        # the training op's log p(ids[t+1] | ids[<=t]) where t+1 is a real token
        nxt = torch.zeros(ids.shape, dtype=ref.dtype)
        nxt[:, :-1] = ref[:, :-1].gather(-1, ids[:, 1:, None])[..., 0] * mask[:, 1:].to(ref.dtype)
        report("reader next-token log-probs (LMLogProb)", nxt, read_npy(os.path.join(go, "reader_next_go.npy")), results)
        top = ref[real].argmax(-1)
        agree = (top == go_lp[real].argmax(-1)).double().mean().item()
        print(f"{'reader argmax agreement':<34} {agree:.4f} of {int(real.sum())} positions")
    return results


def compare_selfrag(export, manifest, go, dtype):
    """A Self-RAG reader: compare_rag's outputs, then the same log-probs restricted to the
    reflection tokens (ragtrain.json "reflection_tokens"): their columns at every real position,
    and the next-token log-probs where the next token is a reflection token."""
    results = compare_rag(export, manifest, go, dtype)
    refl = torch.tensor([t["id"] for t in manifest["reflection_tokens"]])
    with torch.no_grad():
        ids, mask = read_npy(os.path.join(go, "reader_ids.npy")), read_npy(os.path.join(go, "reader_mask.npy"))
        ref = GPT2(os.path.join(export, manifest.get("reader", ".")), dtype).log_probs(ids, mask)
        real = mask.bool()
        go_lp = read_npy(os.path.join(go, "reader_logprobs_go.npy"))
        report(f"reflection-token columns ({len(refl)})", ref[real][:, refl], go_lp[real][:, refl], results)
        nxt = torch.zeros(ids.shape, dtype=torch.bool)
        nxt[:, :-1] = torch.isin(ids[:, 1:], refl) & mask[:, 1:].bool()
        if not nxt.any():
            print("no position is followed by a reflection token: FAIL")
            results.append(math.inf)
            return results
        want = ref[:, :-1].gather(-1, ids[:, 1:, None])[..., 0][nxt[:, :-1]]
        report(f"next = reflection token ({int(nxt.sum())} pos)", want, read_npy(os.path.join(go, "reader_next_go.npy"))[nxt], results)
    return results


KINDS = {"bi-encoder": compare_bi_encoder, "cross-encoder": compare_cross_encoder, "rag": compare_rag,
         "selfrag": compare_selfrag}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", help="directory written by `train export`")
    ap.add_argument("go", help="directory written by `go run ./tools/parity/gen`")
    ap.add_argument("--tol", type=float, default=1e-4, help="largest allowed absolute difference (default 1e-4)")
    ap.add_argument("--float64", action="store_true", help="compute the reference in float64")
    args = ap.parse_args()
    manifest = read_json(os.path.join(args.export, "ragtrain.json"))
    compare = KINDS.get(manifest["kind"])
    if compare is None:
        sys.exit(f"{args.export}/ragtrain.json: kind {manifest['kind']!r} has no parity check yet")
    dtype = torch.float64 if args.float64 else torch.float32
    if manifest["kind"] == "bi-encoder":
        what = f"{manifest.get('encoder', '')}, {'shared' if manifest.get('shared_towers') else 'separate'} towers"
    else:
        what = read_json(os.path.join(args.export, manifest.get("reader", "."), "config.json")).get("architectures", ["?"])[0]
    print(f"export {args.export}: {manifest['kind']}, {what}; reference in {str(dtype)[6:]}, torch {torch.__version__}")
    results = compare(args.export, manifest, args.go, dtype)
    worst = max(results)
    ok = worst <= args.tol
    print(f"{'PASS' if ok else 'FAIL'}: max abs difference {worst:.3e} (tolerance {args.tol:g})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
