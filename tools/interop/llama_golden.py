"""Writes the fixtures of export's LLaMA tests (export/testdata/llama-tiny-*): tiny random
transformers LlamaForCausalLM models (2 layers, grouped-query attention) saved with
save_pretrained, and golden.json with their float32 logits on two fixed id sequences, so the Go
tests pin the architecture against transformers without Python at test time.

    .venv/bin/python tools/interop/llama_golden.py    # rewrites the fixtures (transformers 5.23, torch 2.15)

llama-tiny-f32: float32 weights, tied embeddings. llama-tiny-bf16: bfloat16 weights, an untied
lm_head; its golden logits are those of the checkpoint loaded
with from_pretrained(dtype=torch.float32).
"""
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IDS = [[1, 5, 9, 33, 2, 60, 7, 7, 41, 0, 12, 63], [3, 17, 50, 8, 29, 4, 4, 58, 22, 11, 6, 1]]


def build(seed, tie):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=500000.0,
                      tie_word_embeddings=tie, initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    m = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
    return m


def write(m, name, dtype):
    d = os.path.join(ROOT, "export", "testdata", name)
    os.makedirs(d, exist_ok=True)
    m.to(dtype).save_pretrained(d, safe_serialization=True)
    # What a user gets: the saved checkpoint loaded in float32 (the rotary frequencies computed
    # afresh in float32, not the bfloat16-cast buffer of the model in memory).
    m = LlamaForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = m(torch.tensor(IDS)).logits
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump({"ids": IDS, "logits": [[[round(float(x), 7) for x in row] for row in seq] for seq in logits]}, f)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)


write(build(1, True), "llama-tiny-f32", torch.float32)
write(build(2, False), "llama-tiny-bf16", torch.bfloat16)
