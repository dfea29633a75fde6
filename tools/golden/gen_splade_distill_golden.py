"""Golden values of the SPLADE distillation losses (losses/splade_distill.go): PyTorch autograd, float64.

Run from the repository root:  .venv/bin/python tools/golden/gen_splade_distill_golden.py
It rewrites losses/testdata/splade_distill.json. Written out here so the inputs stay small:

- splade_margin_mse: sentence-transformers 6's SpladeLoss(SparseMarginMSELoss): the MSE between
  the student's margin q.p+ - q.p- and the teacher's t+ - t-, plus FlopsLoss
  (torch.sum(torch.mean(x, dim=0) ** 2)) on the queries and on all the passages.
- splade_kl_distill: F.kl_div(log_softmax(s / tau_s), softmax(t / tau_t), reduction="batchmean")
  over each query's positive and its own hard negatives (p rows i and B+iM..B+iM+M-1), plus the
  same FLOPS terms.

The vectors are log1p(relu(.)) of random logits, so they hold exact zeros as SPLADE's do; the
teacher's scores are random logits of a cross-encoder's range.
"""
import json

import torch
import torch.nn.functional as F

torch.manual_seed(11)
DT = torch.float64


def flops(x):
    return torch.sum(torch.mean(x, dim=0) ** 2)


def sparse(r, v):
    return torch.log1p(torch.relu(torch.randn(r, v, dtype=DT))).requires_grad_()


def candidates(b, m):
    return [[i] + [b + i * m + k for k in range(m)] for i in range(b)]


def case(kind, b, m, v, lq, ld, tau_s=1.0, tau_t=1.0):
    q, p = sparse(b, v), sparse(b * (1 + m), v)
    t = 3 * torch.randn(b, 1 + m, dtype=DT)
    idx = torch.tensor(candidates(b, m))
    s = torch.einsum("bv,bkv->bk", q, p[idx])  # [B,1+M] each query's own candidates
    if kind == "splade_margin_mse":
        distill = F.mse_loss(s[:, 0] - s[:, 1], t[:, 0] - t[:, 1])
    else:
        distill = F.kl_div(F.log_softmax(s / tau_s, dim=1), F.softmax(t / tau_t, dim=1), reduction="batchmean")
    fq, fd = flops(q), flops(p)
    loss = distill + lq * fq + ld * fd
    loss.backward()
    return {
        "kind": kind, "temperature": tau_s, "teacher_temperature": tau_t, "lambda_q": lq, "lambda_d": ld,
        "q": q.detach().tolist(), "p": p.detach().tolist(), "teacher": t.tolist(),
        "distill": distill.item(), "flops_q": fq.item(), "flops_d": fd.item(),
        "loss": loss.item(), "grad_q": q.grad.tolist(), "grad_p": p.grad.tolist(),
    }


cases = [
    case("splade_margin_mse", 3, 1, 11, 0.1, 0.08),
    case("splade_margin_mse", 4, 1, 9, 3e-3, 1e-2),
    case("splade_kl_distill", 3, 2, 11, 0.1, 0.08, 1.0, 0.5),
    case("splade_kl_distill", 2, 3, 9, 3e-3, 1e-2, 0.5, 2.0),
]
with open("losses/testdata/splade_distill.json", "w") as f:
    json.dump({"source": "PyTorch %s autograd, float64" % torch.__version__, "seed": 11, "cases": cases}, f, indent=1)
print("wrote losses/testdata/splade_distill.json:", [(c["kind"], c["loss"]) for c in cases])
