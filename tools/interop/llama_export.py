"""Our LLaMA export (export.WriteLlamaHF, `train export`) loaded by transformers against our own model.

    .venv/bin/python tools/interop/llama_export.py --model pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
    .venv/bin/python tools/interop/llama_export.py --model RUN_EXPORT_DIR     # a fine-tune's export
    .venv/bin/python tools/interop/llama_export.py --model RUN_DIR --n-gen 8  # a reader_lm run: its export vs `train generate -model RUN_DIR`

--model is what our side computes with (a GGUF file, a Hugging Face LLaMA directory read by
export.OpenLlamaHF, or a reader_lm run directory: its latest checkpoint, LoRA merged); --peft loads an adapter directory on --export with peft (want the adapted logits of --model,
the merged export of the same run). --export is the directory transformers loads (default: `go run ./cmd/train
export -run MODEL` into a temporary directory, for a GGUF or a run directory; the model itself for
an exported directory).
transformers loads it with AutoModelForCausalLM.from_pretrained(export, dtype=float32) and
AutoTokenizer.from_pretrained(export) (our tokenizer.json, tokenizer_config.json with the chat
template) and it prints:
  1. logits: tools/interop/llamago -mode logits (the Go training graph) against transformers'
     forward on --n-seq SciFact abstracts (up to --max-len tokens, ids from the exported
     tokenizer): max abs diff (want <= 1e-3);
  2. generation: transformers' model.generate(do_sample=False) on --n-gen chat prompts
     (apply_chat_template of the export) against `go run ./cmd/train generate -chat` on the same
     prompts when --model is a GGUF or a run directory (its printed token ids and text: the
     decoded text is compared too), else llamago -mode generate on transformers' prompt ids: the
     number token-identical (want all).
Exit status 1 when a check fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import ROOT, llamago, read_jsonl  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--export")
    ap.add_argument("--peft", help="a peft adapter directory (train export -adapter) loaded by PeftModel.from_pretrained on --export (the base)")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "scifact"))
    ap.add_argument("--n-seq", type=int, default=4)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--n-gen", type=int, default=4)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefix", action="store_true", help="generation prompts are the first half of each claim's words as plain text "
                    "(no chat template): a fine-tune on claims continues them, where it answers a chat prompt with eos at once")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    src = os.path.abspath(args.model)
    tmp = tempfile.mkdtemp(prefix="interop-llama-export-")
    exp = args.export
    is_run = os.path.isdir(src) and any(os.path.exists(os.path.join(src, f)) for f in ("latest", "trainer_state.json"))
    if exp is None and os.path.isdir(src) and not is_run:
        exp = src
    if exp is None:
        exp = os.path.join(tmp, "export")
        subprocess.run(["go", "run", "./cmd/train", "export", "-run", src, "-out", exp], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    exp = os.path.abspath(exp)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(exp)
    model = AutoModelForCausalLM.from_pretrained(exp, dtype=torch.float32)
    base = None
    if args.peft:
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(exp, dtype=torch.float32).eval()
        model = PeftModel.from_pretrained(model, os.path.abspath(args.peft))
        exp = f"{exp} + peft {os.path.abspath(args.peft)}"
    model.eval()
    ok = True

    corpus = read_jsonl(os.path.join(args.data, "corpus.jsonl"))[: args.n_seq]
    seqs = [tok(c.get("title", "") + " " + c.get("text", ""), add_special_tokens=False)["input_ids"][: args.max_len] for c in corpus]
    llamago(src, seqs, os.path.join(tmp, "logits"), "logits")
    worst, moved = 0.0, 0.0
    for i, s in enumerate(seqs):
        with torch.no_grad():
            ref = model(torch.tensor([s])).logits[0].float().numpy()
            if base is not None:
                moved = max(moved, float(np.abs(base(torch.tensor([s])).logits[0].float().numpy() - ref).max()))
        got = np.fromfile(os.path.join(tmp, "logits", f"logits-{i}.f32"), dtype="<f4").reshape(ref.shape)
        worst = max(worst, float(np.abs(got - ref).max()))
    if base is not None:
        print(f"peft: the adapters move the base's logits by up to {moved:.3g}")
    print(f"logits: max abs diff {worst:.3g} over {len(seqs)} sequences of up to {args.max_len} tokens; "
          f"transformers LlamaForCausalLM from {exp} vs the Go graph on {src}")
    ok &= worst <= 1e-3

    claims = [q["text"] for q in read_jsonl(os.path.join(args.data, "queries.jsonl"))[: args.n_gen]]
    if args.prefix:
        claims = [" ".join(c.split()[: max(1, len(c.split()) // 2)]) for c in claims]
        prompts = [tok(c, add_special_tokens=False)["input_ids"] for c in claims]
    else:
        prompts = [tok(tok.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=False),
                       add_special_tokens=False)["input_ids"] for c in claims]
    if os.path.isfile(src) or is_run:
        path = os.path.join(tmp, "prompts.jsonl")
        with open(path, "w") as f:
            for c in claims:
                f.write(json.dumps({"prompt": c}) + "\n")
        out = subprocess.run(["go", "run", "./cmd/train", "generate", "-model", src, "-prompts", path,
                              "-max-new-tokens", str(args.new)] + ([] if args.prefix else ["-chat"]), cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"train generate: {out.stderr}")
        go = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        how = "train generate" + ("" if args.prefix else " -chat")
    else:
        llamago(src, prompts, os.path.join(tmp, "gen"), "generate", ["-max-new", str(args.new), "-stop", str(tok.eos_token_id)])
        go = read_jsonl(os.path.join(tmp, "gen", "generate.jsonl"))
        how = "llamago -mode generate"
    same, same_text = 0, 0
    for i, p in enumerate(prompts):
        with torch.no_grad():
            hf = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long), max_new_tokens=args.new,
                                do_sample=False)[0, len(p):].tolist()
        if hf and hf[-1] == tok.eos_token_id:
            hf = hf[:-1]
        text = tok.decode(hf, skip_special_tokens=True)
        if hf == go[i]["tokens"]:
            same += 1
        else:
            print(f"  prompt {i}: transformers {hf}\n            go           {go[i]['tokens']}")
        if "text" in go[i] and text == go[i]["text"]:
            same_text += 1
        elif "text" in go[i]:
            print(f"  prompt {i}: transformers text {text!r}\n            go text           {go[i]['text']!r}")
        if i < 3:
            print(f"  prompt {i}: {claims[i]!r} -> {text!r}")
    print(f"generation: {same} of {len(prompts)} {'claim-prefix' if args.prefix else 'chat'} prompts token-identical over up to {args.new} greedy tokens "
          f"(transformers model.generate() on the export vs {how})")
    ok &= same == len(prompts)
    if "text" in go[0]:
        print(f"generation: {same_text} of {len(prompts)} decoded texts identical (tokenizer.decode(skip_special_tokens) of the export vs generate's \"text\")")
        ok &= same_text == len(prompts)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
