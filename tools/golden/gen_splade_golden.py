"""Golden values of the SPLADE losses (losses/splade.go): PyTorch autograd, float64.

Run from the repository root:  .venv/bin/python tools/golden/gen_splade_golden.py
It rewrites losses/testdata/splade.json. The loss is sentence-transformers 6's SpladeLoss with
SparseMultipleNegativesRankingLoss (cross_entropy over dot products / temperature, in-batch and
hard negatives) and FlopsLoss (torch.sum(torch.mean(x, dim=0) ** 2)) on the queries and on all
the passages, written out here so the inputs stay small; the inputs are log1p(relu(.)) of
random logits, so they hold exact zeros as SPLADE's vectors do.
"""
import json

import torch
import torch.nn.functional as F

torch.manual_seed(7)
DT = torch.float64


def flops(x):
    return torch.sum(torch.mean(x, dim=0) ** 2)


def case(b, n, v, tau, lq, ld, masked):
    q = torch.log1p(torch.relu(torch.randn(b, v, dtype=DT))).requires_grad_()
    p = torch.log1p(torch.relu(torch.randn(n, v, dtype=DT))).requires_grad_()
    mask = torch.zeros(b, n, dtype=DT)
    if masked:
        mask[0, 1] = float("-inf")  # passage 1 judged relevant to query 0 too
    s = q @ p.T / tau + mask
    nce = F.cross_entropy(s, torch.arange(b))
    fq, fd = flops(q), flops(p)
    loss = nce + lq * fq + ld * fd
    loss.backward()
    return {
        "kind": "splade", "temperature": tau, "lambda_q": lq, "lambda_d": ld,
        "q": q.detach().tolist(), "p": p.detach().tolist(),
        "mask": [[0 if m == 0 else -1 for m in row] for row in mask.tolist()],
        "infonce": nce.item(), "flops_q": fq.item(), "flops_d": fd.item(),
        "loss": loss.item(), "grad_q": q.grad.tolist(), "grad_p": p.grad.tolist(),
    }


cases = [case(3, 6, 11, 1.0, 0.1, 0.08, False), case(4, 8, 9, 0.5, 3e-3, 1e-2, True)]
with open("losses/testdata/splade.json", "w") as f:
    json.dump({"source": "PyTorch %s autograd, float64" % torch.__version__, "seed": 7, "cases": cases}, f, indent=1)
print("wrote losses/testdata/splade.json:", [c["loss"] for c in cases])
