"""Golden values of the late-interaction losses (losses/colbert_*.go): PyTorch autograd, float64.

Run from the repository root:  .venv/bin/python losses/testdata/gen_colbert_golden.py
It rewrites losses/testdata/colbert.json. The scores follow PyLate 1.6's
pylate/scores/colbert.py (colbert_scores: einsum, scores * mask, max(-1).values, sum(-1)) for
masking "zero", and ColBERT's colbert_score_reduce (padded scores excluded from the max) for
masking "exclude"; the losses follow pylate/losses/contrastive.py (F.normalize on tokens,
cross_entropy(scores / temperature), mean) and pylate/losses/distillation.py (min-max
normalisation with eps 1e-8, KLDivLoss(batchmean, log_target=True) of log_softmax's), with
temperatures added as in losses/kl_distill.go (1, 1 is PyLate's).
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(7)
DT = torch.float64


def maxsim(q, p, qm, pm, masking, cand=None):
    """q [B,Lq,D], p [N,Ld,D], qm [B,Lq], pm [N,Ld] -> [B,N] (or [B,K] over cand)."""
    s = torch.einsum("bih,njh->bnij", q, p)  # [B,N,Lq,Ld]
    if masking == "zero":
        s = s * qm[:, None, :, None] * pm[None, :, None, :]
        v = s.max(dim=-1).values
    else:
        s = s.masked_fill(pm[None, :, None, :] == 0, float("-inf"))
        v = s.max(dim=-1).values
        keep = torch.isfinite(v) & (qm[:, None, :] != 0)
        v = torch.where(keep, v, torch.zeros_like(v))
    out = v.sum(dim=-1)
    if cand is not None:
        out = torch.stack([out[b, c] for b, c in enumerate(cand)])
    return out


def prep(x, sim):
    return F.normalize(x, p=2, dim=-1) if sim == "cosine" else x


def inputs(b, n, lq, ld, d, pad, qpad, tie):
    q = torch.randn(b, lq, d, dtype=DT)
    p = torch.randn(n, ld, d, dtype=DT)
    qm = torch.ones(b, lq, dtype=DT)
    pm = torch.ones(n, ld, dtype=DT)
    for (r, j) in pad:
        pm[r, j] = 0
        p[r, j] = 0  # padding rows are zero vectors, as a tokenizer's pad embeddings after masking
    for (r, i) in qpad:
        qm[r, i] = 0
    for (r, j, j2) in tie:  # token j2 of passage r repeats token j: an exact tie in the max
        p[r, j2] = p[r, j]
    return q, p, qm, pm


def tolist(x):
    return x.detach().tolist()


def contrastive_case(b, m, lq, ld, d, sim, masking, tau, pad, qpad, tie, note):
    n = b * (1 + m)
    q, p, qm, pm = inputs(b, n, lq, ld, d, pad, qpad, tie)
    q.requires_grad_(True)
    p.requires_grad_(True)
    scores = maxsim(prep(q, sim), prep(p, sim), qm, pm, masking)
    loss = F.cross_entropy(scores / tau, torch.arange(b), reduction="mean")
    loss.backward()
    check_tie(p, tie)
    return {"kind": "colbert_contrastive", "note": note, "similarity": sim, "masking": masking,
            "temperature": tau, "q": tolist(q), "p": tolist(p), "q_mask": tolist(qm), "p_mask": tolist(pm),
            "scores": tolist(scores), "loss": loss.item(), "grad_q": tolist(q.grad), "grad_p": tolist(p.grad)}


def distill_case(b, m, lq, ld, d, sim, masking, minmax, tau_s, tau_t, pad, qpad, tie, note):
    n = b * (1 + m)
    q, p, qm, pm = inputs(b, n, lq, ld, d, pad, qpad, tie)
    teacher = torch.randn(b, 1 + m, dtype=DT) * 3
    q.requires_grad_(True)
    p.requires_grad_(True)
    cand = [[i] + [b + i * m + k for k in range(m)] for i in range(b)]
    scores = maxsim(prep(q, sim), prep(p, sim), qm, pm, masking, cand)
    s = scores
    if minmax:
        hi, _ = torch.max(s, dim=1, keepdim=True)
        lo, _ = torch.min(s, dim=1, keepdim=True)
        s = (s - lo) / (hi - lo + 1e-8)
    loss = torch.nn.KLDivLoss(reduction="batchmean", log_target=True)(
        F.log_softmax(s / tau_s, dim=-1), F.log_softmax(teacher / tau_t, dim=-1))
    loss.backward()
    check_tie(p, tie)
    return {"kind": "colbert_kl_distill", "note": note, "similarity": sim, "masking": masking,
            "min_max": minmax, "tau_student": tau_s, "tau_teacher": tau_t,
            "q": tolist(q), "p": tolist(p), "q_mask": tolist(qm), "p_mask": tolist(pm),
            "teacher": tolist(teacher), "scores": tolist(scores), "loss": loss.item(),
            "grad_q": tolist(q.grad), "grad_p": tolist(p.grad)}


def check_tie(p, tie):
    # torch.max(dim) returns the first maximal index and routes the gradient there: the repeated
    # token (the later one) gets none.
    for (r, j, j2) in tie:
        assert torch.all(p.grad[r, j2] == 0), "tie: gradient reached the second maximal token"


def tie_demo():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0]], dtype=DT, requires_grad=True)
    v, i = x.max(dim=-1)
    v.sum().backward()
    assert i.item() == 1 and x.grad.tolist() == [[0.0, 1.0, 0.0, 0.0]], (i, x.grad)


tie_demo()
cases = [
    contrastive_case(3, 1, 4, 5, 6, "cosine", "zero", 1.0, pad=[(0, 4), (1, 3), (1, 4), (4, 4)],
                     qpad=[], tie=[(2, 0, 2), (5, 1, 3)],
                     note="PyLate's Contrastive: cosine, mask multiplies, temperature 1, no query mask (query expansion)"),
    contrastive_case(2, 2, 3, 4, 5, "dot", "exclude", 0.5, pad=[(0, 3), (3, 1), (3, 2), (3, 3), (5, 0)],
                     qpad=[(1, 2)], tie=[(1, 0, 1)],
                     note="dot, padding excluded from the max, a masked query token, passage 3 with one token"),
    distill_case(2, 3, 4, 5, 6, "cosine", "zero", True, 1.0, 1.0, pad=[(0, 4), (3, 3), (3, 4), (6, 4)],
                 qpad=[], tie=[(2, 0, 3)],
                 note="PyLate's Distillation: cosine, mask multiplies, min-max normalised scores, temperatures 1"),
    distill_case(3, 1, 3, 4, 5, "dot", "exclude", False, 0.5, 2.0, pad=[(1, 3), (4, 2), (4, 3)],
                 qpad=[(0, 2), (2, 0)], tie=[(5, 1, 2)],
                 note="dot, padding excluded, no min-max, tau_student 0.5, tau_teacher 2"),
]
out = {"source": "PyTorch %s autograd, float64; losses/testdata/gen_colbert_golden.py" % torch.__version__,
       "seed": 7, "cases": cases}
path = sys.argv[1] if len(sys.argv) > 1 else "losses/testdata/colbert.json"
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
for c in cases:
    print(c["kind"], c["similarity"], c["masking"], "loss %.12g" % c["loss"])
