#!/usr/bin/env python3
"""The PyTorch peer of ragtrain's speed benchmark (bench/, `go run ./cmd/bench`).

It builds, in plain PyTorch, the same models, losses and optimiser as the Go side on the same
token ids (data.json written by the Go side) and times them with the worker protocol of
bench/protocol.go: it prints {"ready": true, ...}; each "run" line on stdin does one timed run
and prints {"seconds", "units", "loss"}; "quit" prints {"peak_rss_kib"} (VmHWM) and exits.

Models (written the way Hugging Face's BertModel is, module by module, so that nothing differs
from the Go graph but the framework):
  - Transformer encoder, BERT post-LN: word + position + token-type embeddings, LayerNorm
    (eps 1e-12), dropout; per layer multi-head self-attention over the non-padding keys (and
    past keys only when causal) with dropout on the weights, output projection, dropout,
    residual, LayerNorm; GELU (erf) feed-forward, dropout, residual, LayerNorm.
  - bow encoder: masked mean of word embeddings, dropout, linear H -> H.
  - bi-encoder: one shared tower, mean pooling, InfoNCE over cosine similarities / tau with a
    candidate mask (van den Oord et al. 2018; Karpukhin et al. 2020).
  - cross-encoder: [CLS] pooling, dropout, linear H -> 1, ListNet loss (Cao et al. 2007).
  - reader: causal Transformer, next-token log-likelihood against the tied word embeddings.
  - AdamW (decoupled decay 0.01, not on biases, LayerNorm, position or type embeddings), global
    gradient-norm clipping at 1.0.

Pretrained-shape workloads (minilm-train, minilm-encode, bge-small-encode, minilm-cross-train,
minilm-cross-score; scifact.json written by the Go side): the same modules at the shapes of
all-MiniLM-L6-v2 (H 384, 6 layers, 12 heads, FFN 1536, V 30522) and bge-small-en-v1.5 (12
layers, [CLS] pooling), random weights; encoding runs the Go side's dynamic-padding plan (the
passages sorted by length, each batch padded to its own length).

--compile wraps the model in torch.compile (the default inductor backend; one untimed run
before "ready" compiles it, so compile time is left out; a failure is reported as an error
starting "torch.compile:"). --autocast runs every step under torch.autocast("cpu",
dtype=torch.bfloat16) (PyTorch's mixed precision: bf16 matrix products, float32 elsewhere; the
optimizer step inside it is not autocast). --st (encoding only) times sentence-transformers' own
SentenceTransformer.encode() on the passages' texts instead: a BertModel of the same shapes with
random weights (transformers' BertConfig, saved with the Go side's tokenizer.json in a temporary
model directory with modules.json, Pooling and Normalize as all-MiniLM-L6-v2's), encode(texts,
batch_size=32), its own tokenizing, length sorting and padding included.

With --describe it prints {"workload", "tensors", "params"} of the workload's model instead
(--workload all: one line per workload); the Go tests check that both sides build models of the
same size.

Needs torch (Debian python3-torch, PyTorch 1.13, or the repository's venv, PyTorch 2,
tools/pyenv/setup.sh); --st needs sentence-transformers (the venv). Installs nothing.
"""
import argparse
import json
import math
import resource
import sys
import time

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # the orchestrator checks first; this is for direct use
    sys.stdout.write(json.dumps({"error": f"cannot import torch ({e}): install Debian python3-torch"}) + "\n")
    sys.exit(1)


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def peak_rss_kib():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


NEG = torch.finfo(torch.float32).min


class Embeddings(nn.Module):
    def __init__(self, vocab, hidden, max_pos, dropout):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.types = nn.Embedding(2, hidden)  # not "type": nn.Module.type is a method
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        for e in (self.word, self.position, self.types):
            nn.init.normal_(e.weight, std=0.02)

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.drop(self.norm(self.word(ids) + self.position(pos)[None] + self.types(types)))


class Layer(nn.Module):
    def __init__(self, hidden, heads, ffn, dropout):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.out = (nn.Linear(hidden, hidden) for _ in range(4))
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in = nn.Linear(hidden, ffn)
        self.ffn_out = nn.Linear(ffn, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        for m in (self.q, self.k, self.v, self.out, self.ffn_in, self.ffn_out):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, x, add_mask):
        B, L, H = x.shape
        h, d = self.heads, H // self.heads

        def split(t):
            return t.view(B, L, h, d).transpose(1, 2)

        s = torch.matmul(split(self.q(x)), split(self.k(x)).transpose(-1, -2)) / math.sqrt(d)
        a = self.drop(torch.softmax(s + add_mask, dim=-1))
        c = torch.matmul(a, split(self.v(x))).transpose(1, 2).reshape(B, L, H)
        x = self.attn_norm(x + self.drop(self.out(c)))
        return self.ffn_norm(x + self.drop(self.ffn_out(F.gelu(self.ffn_in(x)))))


class Transformer(nn.Module):
    def __init__(self, sh, vocab, max_pos, causal=False):
        super().__init__()
        self.embeddings = Embeddings(vocab, sh["hidden"], max_pos, sh["dropout"])
        self.layers = nn.ModuleList(Layer(sh["hidden"], sh["heads"], sh["ffn"], sh["dropout"]) for _ in range(sh["layers"]))
        self.causal = causal

    def tokens(self, ids, mask, types):
        L = ids.shape[1]
        add = (1.0 - mask)[:, None, None, :] * NEG  # padding keys
        if self.causal:
            add = add + torch.triu(torch.full((L, L), NEG), diagonal=1)[None, None]
        x = self.embeddings(ids, types)
        for layer in self.layers:
            x = layer(x, add)
        return x

    def forward(self, ids, mask, types):  # mean pooling
        x = self.tokens(ids, mask, types)
        return (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp_min(1)


class Bow(nn.Module):
    def __init__(self, sh):
        super().__init__()
        self.embeddings = nn.Module()
        self.embeddings.word = nn.Embedding(sh["vocab"], sh["hidden"])
        nn.init.normal_(self.embeddings.word.weight, std=0.02)
        self.drop = nn.Dropout(sh["dropout"])
        self.proj = nn.Linear(sh["hidden"], sh["hidden"])
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, ids, mask, types):
        x = self.embeddings.word(ids)
        x = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp_min(1)
        return self.proj(self.drop(x))


class CrossEncoder(nn.Module):  # BertForSequenceClassification: [CLS] -> tanh pooler -> classifier
    def __init__(self, sh, max_pos=None):
        super().__init__()
        self.encoder = Transformer(sh, sh["vocab"], max_pos or sh["cross_l"])
        self.pooler = nn.Linear(sh["hidden"], sh["hidden"])
        self.drop = nn.Dropout(sh["dropout"])
        self.head = nn.Linear(sh["hidden"], 1)
        for m in (self.pooler, self.head):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, ids, mask, types):
        x = torch.tanh(self.pooler(self.encoder.tokens(ids, mask, types)[:, 0]))
        return self.head(self.drop(x)).squeeze(-1)


class GPT2Block(nn.Module):  # pre-LN: x + attn(ln_1(x)), x + mlp(ln_2(x)), as model/gpt2.go
    def __init__(self, hidden, heads, ffn, dropout, layers):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.q, self.k, self.v, self.out = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.ffn_in = nn.Linear(hidden, ffn)
        self.ffn_out = nn.Linear(ffn, hidden)
        self.drop = nn.Dropout(dropout)
        for m in (self.q, self.k, self.v, self.ffn_in):
            nn.init.normal_(m.weight, std=0.02)
        for m in (self.out, self.ffn_out):
            nn.init.normal_(m.weight, std=0.02 / math.sqrt(2 * layers))
        for m in (self.q, self.k, self.v, self.out, self.ffn_in, self.ffn_out):
            nn.init.zeros_(m.bias)

    def forward(self, x, add_mask):
        B, L, H = x.shape
        h, d = self.heads, H // self.heads

        def split(t):
            return t.view(B, L, h, d).transpose(1, 2)

        y = self.ln_1(x)
        s = torch.matmul(split(self.q(y)), split(self.k(y)).transpose(-1, -2)) / math.sqrt(d)
        a = self.drop(torch.softmax(s + add_mask, dim=-1))
        c = torch.matmul(a, split(self.v(y))).transpose(1, 2).reshape(B, L, H)
        x = x + self.drop(self.out(c))
        return x + self.drop(self.ffn_out(F.gelu(self.ffn_in(self.ln_2(x)))))


class GPT2(nn.Module):  # the reader: wte + wpe, pre-LN blocks, ln_f, tied LM head
    def __init__(self, sh, vocab, max_pos):
        super().__init__()
        self.embeddings = nn.Module()
        self.embeddings.word = nn.Embedding(vocab, sh["hidden"])
        self.embeddings.position = nn.Embedding(max_pos, sh["hidden"])
        for e in (self.embeddings.word, self.embeddings.position):
            nn.init.normal_(e.weight, std=0.02)
        self.drop = nn.Dropout(sh["dropout"])
        self.layers = nn.ModuleList(GPT2Block(sh["hidden"], sh["heads"], sh["ffn"], sh["dropout"], sh["layers"])
                                    for _ in range(sh["layers"]))
        self.ln_f = nn.LayerNorm(sh["hidden"], eps=1e-5)

    def tokens(self, ids, mask, types):
        L = ids.shape[1]
        add = (1.0 - mask)[:, None, None, :] * NEG + torch.triu(torch.full((L, L), NEG), diagonal=1)[None, None]
        pos = torch.arange(L, device=ids.device)
        x = self.drop(self.embeddings.word(ids) + self.embeddings.position(pos)[None])
        for layer in self.layers:
            x = layer(x, add)
        return self.ln_f(x)


def decays(name):  # as trainer.Decays
    return not (name.endswith(".bias") or "norm" in name or ".position" in name or ".type" in name)


def adamw(model, sh):
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if decays(n)], "weight_decay": sh["weight_decay"]},
        {"params": [p for n, p in named if not decays(n)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=sh["lr"], betas=(0.9, 0.999), eps=1e-8)


def seqs(s):
    n, l = s["N"], s["L"]
    ids = torch.tensor(s["ids"], dtype=torch.long).view(n, l)
    mask = torch.tensor(s["mask"], dtype=torch.float32).view(n, l)
    types = torch.tensor(s["types"], dtype=torch.long).view(n, l) if s.get("types") else torch.zeros(n, l, dtype=torch.long)
    return ids, mask, types


def train_step(model, opt, sh, loss_fn):
    opt.zero_grad()
    loss = loss_fn()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), sh["grad_clip"])
    opt.step()
    return loss.item()


def bi_step(data, encoder):
    sh = data["shapes"]
    model = Transformer(sh, sh["vocab"], sh["L"]) if encoder == "transformer" else Bow(sh)
    model.train()
    opt = adamw(model, sh)
    batches = []
    for b in data["bi"]:
        keep = torch.tensor(b["keep"], dtype=torch.float32).view(sh["bi_b"], 2 * sh["bi_b"])
        batches.append((seqs(b["q"]), seqs(b["p"]), (1.0 - keep) * NEG))
    labels = torch.arange(sh["bi_b"])
    state = {"step": 0}

    def run():
        q_in, p_in, add = batches[state["step"] % len(batches)]
        state["step"] += 1

        def loss_fn():
            q = F.normalize(model(*q_in), dim=-1)
            p = F.normalize(model(*p_in), dim=-1)
            return F.cross_entropy(q @ p.T / sh["temperature"] + add, labels)

        return sh["bi_b"], train_step(model, opt, sh, loss_fn)

    return model, run


def encode(data, encoder):
    sh = data["shapes"]
    model = Transformer(sh, sh["vocab"], sh["L"]) if encoder == "transformer" else Bow(sh)
    model.eval()
    ids, mask, types = seqs(data["encode"])
    B = sh["encode_b"]

    def run():
        with torch.inference_mode():
            out = torch.cat([model(ids[i:i + B], mask[i:i + B], types[i:i + B]) for i in range(0, ids.shape[0], B)])
        return ids.shape[0], float((out * out).sum())

    return model, run


def cross_step(data):
    sh = data["shapes"]
    model = CrossEncoder(sh)
    model.train()
    opt = adamw(model, sh)
    batches = [(seqs(b["pairs"]), torch.tensor(b["labels"], dtype=torch.float32).view(sh["cross_lists"], sh["cross_k"]))
               for b in data["cross"]]
    state = {"step": 0}

    def run():
        pairs, y = batches[state["step"] % len(batches)]
        state["step"] += 1

        def loss_fn():  # ListNet: cross-entropy between label and score distributions
            a = model(*pairs).view(y.shape)
            t = y / y.sum(1, keepdim=True)
            return -(t * F.log_softmax(a, dim=1)).sum(1).mean()

        return y.numel(), train_step(model, opt, sh, loss_fn)

    return model, run


def cross_score(data):
    sh = data["shapes"]
    model = CrossEncoder(sh)
    model.eval()
    ids, mask, types = seqs(data["score"])
    B = sh["score_b"]

    def run():
        with torch.inference_mode():
            out = torch.cat([model(ids[i:i + B], mask[i:i + B], types[i:i + B]) for i in range(0, ids.shape[0], B)])
        return ids.shape[0], float(out.sum())

    return model, run


def reader_step(data):
    sh = data["shapes"]
    model = GPT2(sh, sh["reader_vocab"], sh["reader_l"])
    model.train()
    opt = adamw(model, sh)
    ids, mask, types = seqs(data["reader"])
    B, L = ids.shape
    pos = (torch.arange(B)[:, None] * L + torch.arange(L - 1)[None]).reshape(-1)
    tgt = ids[:, 1:].reshape(-1)

    def loss_fn():
        h = model.tokens(ids, mask, types).reshape(B * L, -1)[pos]
        logits = h @ model.embeddings.word.weight.T  # tied output embeddings
        return -F.log_softmax(logits, dim=-1).gather(1, tgt[:, None]).mean()

    return model, lambda: (B, train_step(model, opt, sh, loss_fn))


# The pretrained-shape workloads (scifact.json).

def model_shape(data, which):
    """The workload's shapes with the model's architecture over them."""
    sh = dict(data["shapes"])
    sh.update(data["shapes"][which])
    return sh


class ClsTransformer(Transformer):  # bge: the [CLS] token's vector
    def forward(self, ids, mask, types):
        return self.tokens(ids, mask, types)[:, 0]


def encoder_of(sh):
    cls = ClsTransformer if sh["pooling"] == "cls" else Transformer
    return cls(sh, sh["vocab"], sh["max_position"])


def sci_bi_step(data, wrap):
    sh = model_shape(data, "minilm")
    model = encoder_of(sh)
    model.train()
    opt = adamw(model, sh)
    fwd = wrap(model)
    batches = []
    for b in data["bi"]:
        B = b["q"]["N"]
        keep = torch.tensor(b["keep"], dtype=torch.float32).view(B, 2 * B)
        batches.append((seqs(b["q"]), seqs(b["p"]), (1.0 - keep) * NEG, torch.arange(B)))
    state = {"step": 0}

    def run():
        q_in, p_in, add, labels = batches[state["step"] % len(batches)]
        state["step"] += 1

        def loss_fn():
            q = F.normalize(fwd(*q_in), dim=-1)
            p = F.normalize(fwd(*p_in), dim=-1)
            return F.cross_entropy(q @ p.T / sh["temperature"] + add, labels)

        return len(labels), train_step(model, opt, sh, loss_fn)

    return model, run


def planned_batches(data, pad_id=0):
    """The Go side's dynamic-padding plan: each batch's rows padded to its L."""
    ids = data["encode"]["ids"]
    out = []
    for b in data["encode"]["batches"]:
        L, rows = b["L"], b["rows"]
        t = torch.full((len(rows), L), pad_id, dtype=torch.long)
        m = torch.zeros((len(rows), L), dtype=torch.float32)
        for k, i in enumerate(rows):
            t[k, :len(ids[i])] = torch.tensor(ids[i])
            m[k, :len(ids[i])] = 1
        out.append((rows, t, m, torch.zeros_like(t)))
    return out


def sci_encode(data, which, wrap):
    sh = model_shape(data, which)
    model = encoder_of(sh)
    model.eval()
    fwd = wrap(model)
    plan = planned_batches(data)
    n = len(data["encode"]["ids"])

    def run():
        out = torch.empty(n, sh["hidden"])
        with torch.inference_mode():
            for rows, ids, mask, types in plan:
                out[rows] = fwd(ids, mask, types)
        return n, float((out * out).sum())

    return model, run


def sci_cross_step(data, wrap):
    sh = model_shape(data, "minilm")
    model = CrossEncoder(sh, sh["max_position"])
    model.train()
    opt = adamw(model, sh)
    fwd = wrap(model)
    batches = [(seqs(b["pairs"]), torch.tensor(b["labels"], dtype=torch.float32).view(sh["cross_lists"], sh["cross_k"]))
               for b in data["cross"]]
    state = {"step": 0}

    def run():
        pairs, y = batches[state["step"] % len(batches)]
        state["step"] += 1

        def loss_fn():  # ListNet, as cross_step
            a = fwd(*pairs).view(y.shape)
            t = y / y.sum(1, keepdim=True)
            return -(t * F.log_softmax(a, dim=1)).sum(1).mean()

        return y.numel(), train_step(model, opt, sh, loss_fn)

    return model, run


def sci_cross_score(data, wrap):
    sh = model_shape(data, "minilm")
    model = CrossEncoder(sh, sh["max_position"])
    model.eval()
    fwd = wrap(model)
    ids, mask, types = seqs(data["score"])
    B = sh["score_b"]

    def run():
        with torch.inference_mode():
            out = torch.cat([fwd(ids[i:i + B], mask[i:i + B], types[i:i + B]) for i in range(0, ids.shape[0], B)])
        return ids.shape[0], float(out.sum())

    return model, run


def st_encode(data, which):
    """sentence-transformers' encode() on a randomly initialised BertModel of the shapes."""
    import os
    import tempfile
    import sentence_transformers
    from transformers import BertConfig, BertModel, BertTokenizerFast
    sh = model_shape(data, which)
    cfg = BertConfig(vocab_size=sh["vocab"], hidden_size=sh["hidden"], num_hidden_layers=sh["layers"],
                     num_attention_heads=sh["heads"], intermediate_size=sh["ffn"], max_position_embeddings=sh["max_position"],
                     hidden_act="gelu", layer_norm_eps=1e-12)
    d = tempfile.mkdtemp(prefix="ragtrain-st-")
    BertModel(cfg).save_pretrained(d)
    BertTokenizerFast(tokenizer_file=data["tokenizer_file"]).save_pretrained(d)
    modules = [("0", "", "Transformer"), ("1", "1_Pooling", "Pooling"), ("2", "2_Normalize", "Normalize")]
    with open(os.path.join(d, "modules.json"), "w") as f:
        json.dump([{"idx": i, "name": n, "path": p, "type": "sentence_transformers.models." + t} for i, (n, p, t) in enumerate(modules)], f)
    os.makedirs(os.path.join(d, "1_Pooling"))
    with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": sh["hidden"], "pooling_mode_cls_token": sh["pooling"] == "cls",
                   "pooling_mode_mean_tokens": sh["pooling"] != "cls"}, f)
    with open(os.path.join(d, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": sh["encode_l"], "do_lower_case": False}, f)
    model = sentence_transformers.SentenceTransformer(d, device="cpu")
    model.eval()
    texts = data["encode"]["texts"]
    # The same token ids as the other sides? (A difference is reported, not fatal.)
    tok = BertTokenizerFast.from_pretrained(d)
    got = tok(texts[:32], truncation=True, max_length=sh["encode_l"])["input_ids"]
    differ = sum(1 for a, b in zip(got, data["encode"]["ids"][:32]) if a != b)
    if differ:
        print(f"warning: sentence-transformers' tokenizer gives other ids than the Go side's for {differ} of 32 passages")

    def run():
        v = model.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
        return len(texts), float((v * v).sum())

    return model, run


def eager(model):
    return model


def compiled(model):
    return torch.compile(model)


SCIFACT = {
    "minilm-train": lambda d, w: sci_bi_step(d, w),
    "minilm-encode": lambda d, w: sci_encode(d, "minilm", w),
    "bge-small-encode": lambda d, w: sci_encode(d, "bge_small", w),
    "minilm-cross-train": lambda d, w: sci_cross_step(d, w),
    "minilm-cross-score": lambda d, w: sci_cross_score(d, w),
}
ST = {
    "minilm-encode": lambda d: st_encode(d, "minilm"),
    "bge-small-encode": lambda d: st_encode(d, "bge_small"),
}

WORKLOADS = {
    "bi-transformer-step": lambda d: bi_step(d, "transformer"),
    "bi-bow-step": lambda d: bi_step(d, "bow"),
    "encode-transformer": lambda d: encode(d, "transformer"),
    "encode-bow": lambda d: encode(d, "bow"),
    "cross-step": cross_step,
    "cross-score": cross_score,
    "reader-step": reader_step,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True, choices=sorted(WORKLOADS) + sorted(SCIFACT) + ["all"], help="all: only with --describe")
    ap.add_argument("--data", required=True, help="data.json written by the Go side")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--describe", action="store_true", help="print the model's parameter count and exit")
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile (pretrained-shape workloads)")
    ap.add_argument("--st", action="store_true", help="time sentence-transformers' encode() (encoding workloads)")
    ap.add_argument("--autocast", action="store_true", help="run each timed step under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    if args.workload == "all" and not args.describe:
        ap.error("--workload all needs --describe")
    try:
        with open(args.data) as f:
            data = json.load(f)
        scifact = "encode" in data and "batches" in data["encode"]
        table = (ST if args.st else SCIFACT) if scifact else WORKLOADS
        names = sorted(table) if args.workload == "all" else [args.workload]
        if args.workload not in table and args.workload != "all":
            raise ValueError(f"workload {args.workload} is not one of this data file's {sorted(table)}"
                             + (" with --st" if args.st else ""))
        if scifact and not args.st:
            built = {name: table[name](data, eager) for name in names}
        else:
            built = {name: table[name](data) for name in names}
    except Exception as e:  # report, do not hang the orchestrator
        send({"error": f"{type(e).__name__}: {e}"})
        return 1
    if args.describe:
        for name, (model, _) in built.items():
            # BertModel's pooler is not used by sentence-transformers (nor by our bi-encoder).
            ps = [p for n, p in model.named_parameters() if not (args.st and ".pooler." in n)]
            send({"workload": name, "tensors": len(ps), "params": sum(p.numel() for p in ps)})
        return 0
    system = f"PyTorch {torch.__version__}"
    if args.compile:
        if not scifact or args.st:
            send({"error": "torch.compile: only for the pretrained-shape workloads of PyTorch modules"})
            return 1
        try:
            torch.manual_seed(42)
            _, run = table[args.workload](data, compiled)
            run()  # compiles; untimed, as imports are
        except Exception as e:
            send({"error": f"torch.compile: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
            return 1
        system += " torch.compile"
    else:
        run = built[args.workload][1]
    if args.st:
        import sentence_transformers
        system = f"sentence-transformers {sentence_transformers.__version__} (PyTorch {torch.__version__})"
    if args.autocast:
        plain = run

        def run():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return plain()

        system += ", bf16 autocast"
    send({"ready": True, "system": system, "threads": torch.get_num_threads()})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            t0, c0 = time.perf_counter(), time.process_time()
            units, loss = run()
            send({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "units": units, "loss": loss})
        elif cmd == "quit":
            send({"peak_rss_kib": peak_rss_kib()})
            return 0
        else:
            send({"error": f"unknown command {cmd!r}"})
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
