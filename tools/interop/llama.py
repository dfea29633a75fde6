"""Parity of ragtrain's Go LLaMA decoder (model.Llama, model.LlamaDecoder) with transformers.

    bash tools/interop/run.sh llama pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf

transformers loads the same GGUF file (AutoModelForCausalLM.from_pretrained(dir,
gguf_file=name, dtype=torch.float32): dequantized to float32, Q/K rows un-permuted) and
its tokenizer; both sides get transformers' token ids, so this checks the decoder alone. It
prints:
  1. logits: the Go training graph (tools/interop/llamago -mode logits) against the model's
     forward on N sequences (SciFact abstracts, title + " " + text, the first --n-seq of the
     corpus, truncated to --max-len tokens): the max abs difference over every position and
     vocabulary entry (want <= 1e-3), and the positions whose argmax differs where transformers'
     top-2 gap exceeds 1e-3 (want 0);
  2. generation: greedy decoding of --new tokens (eos <|im_end|> stops) for --n-gen chat
     prompts (SciFact claims asked as questions, the tokenizer's chat template): Go
     (LlamaDecoder.Generate, -mode generate) against transformers' greedy choice at every step
     (one forward over prompt + Go's tokens: the argmax at each step must be Go's token, eos
     where Go stopped), the number token-identical (want >= n-gen - 2), and for each divergence
     the step and both sides' top-2 logit gap there; the first --hf-generate prompts also run
     model.generate(do_sample=False) itself (want all identical where the forward agreed).
Exit status 1 when a check fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def llamago(gguf, seqs, out, mode, extra=()):
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "in.jsonl")
    with open(path, "w") as f:
        for s in seqs:
            f.write(json.dumps({"ids": [int(x) for x in s]}) + "\n")
    cmd = ["go", "run", "./tools/interop/llamago", "-model", gguf, "-in", path, "-out", out, "-mode", mode, *extra]
    subprocess.run(cmd, cwd=ROOT, check=True)


def top2(row):
    i = np.argsort(row)[-2:]
    return int(i[1]), float(row[i[1]] - row[i[0]])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["llama"])
    ap.add_argument("gguf")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "scifact"))
    ap.add_argument("--n-seq", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--n-gen", type=int, default=50)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hf-generate", type=int, default=5, help="prompts also decoded by model.generate() (slow)")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines as they come, also into a log file
    gguf = os.path.abspath(args.gguf)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    d, name = os.path.dirname(gguf), os.path.basename(gguf)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, dtype=torch.float32)
    model.eval()
    tmp = tempfile.mkdtemp(prefix="interop-llama-")
    ok = True

    # 1. logits
    corpus = read_jsonl(os.path.join(args.data, "corpus.jsonl"))[: args.n_seq]
    seqs = [tok(c.get("title", "") + " " + c.get("text", ""), add_special_tokens=False)["input_ids"][: args.max_len] for c in corpus]
    llamago(gguf, seqs, os.path.join(tmp, "logits"), "logits")
    worst, flips, near, positions = 0.0, 0, 0, 0
    for i, s in enumerate(seqs):
        with torch.no_grad():
            ref = model(torch.tensor([s])).logits[0].float().numpy()
        path = os.path.join(tmp, "logits", f"logits-{i}.f32")
        got = np.fromfile(path, dtype="<f4").reshape(ref.shape)
        os.remove(path)
        worst = max(worst, float(np.abs(got - ref).max()))
        srt = np.sort(ref, axis=1)
        gap = srt[:, -1] - srt[:, -2]
        differ = got.argmax(1) != ref.argmax(1)
        flips += int((differ & (gap > 1e-3)).sum())
        near += int((differ & (gap <= 1e-3)).sum())
        positions += len(s)
    print(f"logits: max abs diff {worst:.3g} over {len(seqs)} sequences ({positions} positions, lengths "
          f"{min(map(len, seqs))}..{max(map(len, seqs))}), V {model.config.vocab_size}; argmax differs at {flips} positions "
          f"with top-2 gap > 1e-3 ({near} at near-ties); Go graph vs transformers {type(model).__name__} float32 of {name}")
    ok &= worst <= 1e-3 and flips == 0

    # 2. greedy generation
    claims = [q["text"] for q in read_jsonl(os.path.join(args.data, "queries.jsonl"))[: args.n_gen]]
    prompts = []
    for c in claims:
        text = tok.apply_chat_template([{"role": "user", "content": f"Is this claim true? {c}"}], add_generation_prompt=True, tokenize=False)
        prompts.append(tok(text, add_special_tokens=False)["input_ids"])
    t0 = time.time()
    llamago(gguf, prompts, os.path.join(tmp, "gen"), "generate", ["-max-new", str(args.new), "-stop", str(tok.eos_token_id)])
    go_s = time.time() - t0
    go = read_jsonl(os.path.join(tmp, "gen", "generate.jsonl"))
    # transformers' greedy choice at every step of Go's continuation (one teacher-forced forward per
    # prompt): the continuation is transformers' greedy one iff every step's argmax is Go's token
    # (eos where Go stopped). The first --hf-generate prompts also run model.generate() itself.
    same, agree, t0 = 0, [], time.time()
    for i, p in enumerate(prompts):
        g = go[i]["tokens"]
        stopped = len(g) < args.new
        seq = p + g + ([tok.eos_token_id] if stopped else [])
        with torch.no_grad():
            logits = model(torch.tensor([seq])).logits[0, len(p) - 1 : len(seq) - 1].float().numpy()
        want = seq[len(p):]
        k = next((j for j in range(len(want)) if int(logits[j].argmax()) != want[j]), None)
        agree.append(k is None)
        if k is None:
            same += 1
        else:
            _, hf_gap = top2(logits[k])
            print(f"  prompt {i}: diverges at step {k}: go {want[k]}, transformers {int(logits[k].argmax())}; "
                  f"top-2 gap there: transformers {hf_gap:.3g}, go {go[i]['gaps'][k]:.3g}")
    hf_s = time.time() - t0
    gen_same = 0
    for i, p in enumerate(prompts[: args.hf_generate]):
        with torch.no_grad():
            out = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long), max_new_tokens=args.new,
                                 do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)[0, len(p):].tolist()
        if out and out[-1] == tok.eos_token_id:
            out = out[:-1]
        gen_same += out == go[i]["tokens"]
        if (out == go[i]["tokens"]) != agree[i]:
            print(f"  prompt {i}: model.generate() {'agrees' if out == go[i]['tokens'] else 'differs'} but the step-wise argmax {'agrees' if agree[i] else 'differs'}")
    print(f"generation: {same} of {len(prompts)} chat prompts token-identical over up to {args.new} greedy tokens "
          f"(Go LlamaDecoder.Generate {go_s:.0f}s incl. build and load; transformers' argmax at every step, {hf_s:.0f}s); "
          f"model.generate() itself identical on {gen_same} of the first {min(args.hf_generate, len(prompts))}")
    ok &= gen_same >= sum(agree[: args.hf_generate])
    ok &= same >= len(prompts) - 2
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
