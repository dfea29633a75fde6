#!/usr/bin/env python3
"""The SmolLM2 peers of ragtrain's speed benchmark (bench/smollm2.go, `go run ./cmd/bench -only
smollm2-...`), with the worker protocol of bench/protocol.go (see peer.py).

smollm2.json (written by the Go side) names the GGUF and holds the token ids.

--backend transformers (default): LlamaForCausalLM.from_pretrained(dir, gguf_file=...) in
float32 (transformers dequantizes the GGUF as our side does), PyTorch 2 eager (the default
attention implementation, no torch.compile).
  - smollm2-train-full / -lora: one step on the training rows: model(ids, labels=ids).loss (the
    mean next-token NLL over B x (L-1) targets, as losses.TokenNLL), backward, global gradient
    clipping, torch.optim.AdamW (lr, weight decay of the shapes); LoRA through peft
    (LoraConfig with the shapes' rank, alpha, dropout and targets; the base frozen).
  - smollm2-generate-b1 / -b8: model.generate(prompts, max_new_tokens, greedy, KV cache, no eos
    stop), the prompts batched (all of the same length, no padding).
--backend llamacpp: llama-cpp-python on the same GGUF (its own Q4_1/Q8_0 kernels, not float32),
generation only: greedy, the prompts one after another (llama-cpp-python's Llama serves one
sequence), n_ctx = prompt + new tokens.

The digest of a generation run is sha256 of one line "[t1 t2 ...]" per prompt (Go's fmt of the
new token ids), its first 16 hex digits, as bench/smollm2.go writes it. Needs peer.py beside it
(the orchestrator writes both) for the protocol's helpers.
"""
import argparse
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import peak_rss_kib, send  # noqa: E402  (peer.py, written beside this script)


def digest(rows):
    h = hashlib.sha256()
    for r in rows:
        h.update(("[" + " ".join(str(t) for t in r) + "]\n").encode())
    return h.hexdigest()[:16]


def transformers_model(data):
    import torch
    from transformers import AutoModelForCausalLM
    path = data["gguf"]
    m = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
    return m


def train(data, lora):
    import torch
    s = data["shapes"]
    m = transformers_model(data)
    if lora:
        from peft import LoraConfig, get_peft_model
        lc = s["LoRA"]
        m = get_peft_model(m, LoraConfig(r=lc["r"], lora_alpha=lc["lora_alpha"], lora_dropout=lc["lora_dropout"],
                                         target_modules=lc["target_modules"], bias="none", task_type="CAUSAL_LM"))
    m.train()
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s["LR"], weight_decay=s["WD"], betas=(0.9, 0.999), eps=1e-8)
    ids = torch.tensor(data["train"], dtype=torch.long)

    def run():
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, s["Clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        return len(data["train"]), float(loss)
    return run


def generate_transformers(data, n):
    import torch
    s = data["shapes"]
    m = transformers_model(data)
    m.eval()
    m.generation_config.eos_token_id = None  # no stop: every prompt gets max_new tokens
    m.generation_config.pad_token_id = data["eos"]
    ids = torch.tensor(data["prompts"][:n], dtype=torch.long)
    state = {}

    def run():
        with torch.inference_mode():
            out = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=s["MaxNew"],
                             do_sample=False, use_cache=True, eos_token_id=None)
        new = out[:, ids.shape[1]:].tolist()
        state["digest"] = digest(new)
        return sum(len(r) for r in new), 0.0
    return run, state


def generate_llamacpp(data, n, threads):
    import llama_cpp
    s = data["shapes"]
    llm = llama_cpp.Llama(model_path=data["gguf"], n_ctx=s["PromptL"] + s["MaxNew"], n_batch=s["PromptL"],
                          n_threads=threads, n_threads_batch=threads, verbose=False)
    prompts = data["prompts"][:n]
    state = {}

    def run():
        rows = []
        for p in prompts:
            llm.reset()
            row = []
            for tok in llm.generate(p, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
                row.append(int(tok))
                if len(row) == s["MaxNew"]:
                    break
            rows.append(row)
        state["digest"] = digest(rows)
        return sum(len(r) for r in rows), 0.0
    return run, state


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True, choices=["smollm2-train-full", "smollm2-train-lora", "smollm2-generate-b1", "smollm2-generate-b8"])
    ap.add_argument("--data", required=True, help="smollm2.json written by the Go side")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backend", choices=["transformers", "llamacpp"], default="transformers")
    args = ap.parse_args()
    state = {}
    try:
        with open(args.data) as f:
            data = json.load(f)
        n = 1 if args.workload.endswith("-b1") else data["shapes"]["GenB"]
        if args.backend == "llamacpp":
            if "generate" not in args.workload:
                raise ValueError("llama.cpp runs the generation workloads only")
            import llama_cpp
            run, state = generate_llamacpp(data, n, args.threads)
            system = f"llama-cpp-python {llama_cpp.__version__}"
            threads = args.threads
        else:
            import torch
            import transformers
            torch.set_num_threads(args.threads)
            torch.manual_seed(42)
            if "generate" in args.workload:
                run, state = generate_transformers(data, n)
            else:
                run = train(data, args.workload.endswith("-lora"))
            system = f"PyTorch {torch.__version__} eager, transformers {transformers.__version__}"
            threads = torch.get_num_threads()
    except Exception as e:  # report, do not hang the orchestrator
        send({"error": f"{type(e).__name__}: {e}"})
        return 1
    send({"ready": True, "system": system, "threads": threads})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            t0, c0 = time.perf_counter(), time.process_time()
            units, loss = run()
            msg = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "units": units, "loss": loss}
            if "digest" in state:
                msg["digest"] = state["digest"]
            send(msg)
        elif cmd == "quit":
            send({"peak_rss_kib": peak_rss_kib()})
            return 0
        else:
            send({"error": f"unknown command {cmd!r}"})
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
