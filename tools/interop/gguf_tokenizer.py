"""Parity of ragtrain's GGUF tokenizer (tokenize.LoadGGUFTokenizer) with transformers.

    bash tools/interop/run.sh ... is for encoders; this check runs as
    .venv/bin/python tools/interop/gguf_tokenizer.py \
        --gguf pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf \
        [--scifact datasets/scifact] [--out /tmp/ggtok] [--golden tokenize/testdata/smollm2_golden.json]

Texts: every SciFact claim (queries.jsonl text), every abstract (corpus.jsonl title and text,
each on its own) and 1,000 hand-made strings (hand_strings below: numbers, unicode, whitespace
runs, emoji, characters whose UTF-8 bytes the vocabulary lacks, special tokens, contractions).
The Go side (tools/interop/ggtok) writes the ids of each text and WriteHF's directory; this
script compares them, id for id, with
  1. transformers AutoTokenizer.from_pretrained(dir, gguf_file=...) (the reference),
  2. tokenizers.Tokenizer.from_file(<WriteHF dir>/tokenizer.json),
  3. transformers AutoTokenizer.from_pretrained(<WriteHF dir>),
and prints the number of mismatched texts for each. Exit status 1 on any mismatch. When
llama-cpp-python is importable it also prints how many texts llama.cpp's tokenizer (vocab_only,
special tokens parsed, no BOS) tokenizes differently from ours, and how many of those differences
remain when transformers' tokenizer is given llama.cpp's digit split first (a cross-check, not a
failure: llama.cpp's "smollm" pre-tokenizer isolates digits, transformers' does not).
With --golden it also writes a few dozen strings with transformers' ids, the fixture of the
Go unit test (tokenize/gguf_test.go) that runs without Python.
"""
import argparse
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FRAGMENTS = [
    # numbers
    "0", "7", "42", "12345", "3.14159", "-2.5e-10", "1,000,000", "2024-06-01", "10%", "½", "²", "٣", "Ⅻ", "१२३",
    "0x1F", "1st", "v2.0.1", "$19.99", "IL-6", "p<0.001", "95% CI", "n=1,234",
    # words, contractions, case
    "Hello", "world", "don't", "it's", "I'M", "we'll", "they'd", "'s", "'S", "''", "o'clock", "rock'n'roll",
    "CAFÉ", "naïve", "Ångström", "straße", "İstanbul", "ǅ",
    # unicode scripts and marks
    "日本語のテキスト", "中文", "한국어", "Ελληνικά", "русский", "עברית", "العربية", "हिन्दी", "ไทย", "e\u0301", "a\u0308\u0323",
    "\u200b", "\u200d", "\ufeff", "\u00ad", "ﬁ", "Ｆｕｌｌ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "∑∫√∞≠", "→⇒", "©®™", "«»„“", "…", "—", "·",
    # emoji
    "😀", "🤗", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🧬", "🦠", "✅",
    # characters whose UTF-8 uses bytes the vocabulary lacks (0x04 0x06 0x13 0x14 0x16 0x1d, lead bytes 0xF1-0xF3)
    "\x04", "\x06", "\x13", "\x14", "\x16", "\x1d", "\x00", "\x7f", "\U00040000", "\U000F0000", "\U0010FFFD", "\U00050123",
    # punctuation and code
    "!", "?!", "...", "((x))", "a+b=c", "#include <stdio.h>", "<p>", "</s>", "<|", "|>", "<|im_start", "im_end|>",
    "def f(x):", "{\"k\": [1, 2]}", "C:\\path\\to", "https://example.org/a?b=c", "@user", "#tag", "~/.bashrc",
    # special tokens of the file
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<reponame>", "<file_sep>", "<jupyter_code>",
    "<empty_output>", "<|im_start|><|im_end|>",
]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u2009", "\u0085", "\x0b", "\x0c", "    \n\t "]


def hand_strings(n=1000, seed=38):
    """n deterministic strings: each a few fragments joined by random whitespace."""
    rng = random.Random(seed)
    out = []
    # Every fragment alone, and with a leading and trailing space run.
    for f in FRAGMENTS:
        out.append(f)
    for s in SPACES:
        out.append(s)
        out.append("a" + s + "b")
        out.append(s + "1" + s)
    while len(out) < n:
        k = rng.randint(2, 8)
        parts = []
        for _ in range(k):
            parts.append(rng.choice(FRAGMENTS))
            parts.append(rng.choice(SPACES) if rng.random() < 0.7 else "")
        if rng.random() < 0.3:
            parts.insert(0, rng.choice(SPACES))
        out.append("".join(parts))
    return out[:n]


def golden_strings():
    return [
        "Hello world", "Hello world 12345 x", " leading space", "trailing space ", "  a\n\n b  ",
        "don't stop", "I'M HERE", "café 🤗 ∑", "<|im_start|>user\nhi<|im_end|>\n", "<|im_start|>assistant\n",
        "numbers: 3.14159, 1,000,000 and 2024-06-01", "日本語のテキスト", "👨‍👩‍👧‍👦 family", "\x04\x06 control bytes",
        "\U000F0000 private use", "tabs\tand\nnewlines\r\n", "a\u00a0b\u3000c", "<|im_start", "x<|endoftext|>y",
        "IL-6 (p<0.001) in 95% CI", "e\u0301 vs é", "https://example.org/a?b=c", "def f(x):\n    return x",
        "'s 're 've 'm 'll 'd 't", "    \n\t ", "", "0-dimensional biomaterials lack inductive properties.",
        "ǅ İstanbul straße", "\u200b\u200d\ufeff", "<empty_output><jupyter_code>", "a+b=c", "¡¬®ÿ",
    ]


def read_jsonl(path, fields):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            out.extend(o[k] for k in fields if o.get(k))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--scifact", default=os.path.join(ROOT, "datasets/scifact"))
    ap.add_argument("--out", default="/tmp/ggtok-parity")
    ap.add_argument("--golden", default="")
    a = ap.parse_args()
    from transformers import AutoTokenizer
    import tokenizers

    claims = read_jsonl(os.path.join(a.scifact, "queries.jsonl"), ["text"])
    abstracts = read_jsonl(os.path.join(a.scifact, "corpus.jsonl"), ["title", "text"])
    hand = hand_strings()
    groups = [("scifact claims", claims), ("scifact abstracts (title, text)", abstracts), ("hand-made", hand)]
    texts = claims + abstracts + hand
    # Id sequences to decode: random ids (partial UTF-8 byte tokens included) and special ids.
    rng = random.Random(39)
    id_seqs = [[rng.randrange(49152) for _ in range(rng.randint(1, 12))] for _ in range(500)]
    id_seqs += [[rng.choice([0, 1, 2, 3, 16, 198, 216]) for _ in range(rng.randint(1, 6))] for _ in range(100)]
    os.makedirs(a.out, exist_ok=True)
    tpath, idpath, hfdir = (os.path.join(a.out, x) for x in ("texts.jsonl", "ids.jsonl", "hf"))
    with open(tpath, "w", encoding="utf-8") as f:
        for t in texts + id_seqs:
            f.write(json.dumps(t) + "\n")
    subprocess.run(["go", "run", "./tools/interop/ggtok", "-gguf", a.gguf, "-texts", tpath, "-out", idpath, "-hf", hfdir],
                   cwd=ROOT, check=True)
    with open(idpath, encoding="utf-8") as f:
        rows = [json.loads(l) for l in f]
    assert len(rows) == len(texts) + len(id_seqs), (len(rows), len(texts))
    ours = [r["ids"] for r in rows[:len(texts)]]

    ref = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(a.gguf)), gguf_file=os.path.basename(a.gguf))
    fast = tokenizers.Tokenizer.from_file(os.path.join(hfdir, "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(hfdir)
    refs = [ref.encode(t, add_special_tokens=True) for t in texts]
    checks = {
        "go vs transformers(gguf_file)": ours,
        "WriteHF tokenizer.json in tokenizers vs transformers(gguf_file)": [fast.encode(t).ids for t in texts],
        "WriteHF dir in transformers AutoTokenizer vs transformers(gguf_file)": [auto.encode(t) for t in texts],
    }
    bad = 0
    for name, got in checks.items():
        start = 0
        for gname, g in groups:
            mism = [i for i in range(start, start + len(g)) if got[i] != refs[i]]
            print(f"{name}: {gname}: {len(mism)} mismatched of {len(g)} texts")
            for i in mism[:5]:
                print("   ", repr(texts[i][:120]), "\n     ours", got[i][:40], "\n     ref ", refs[i][:40])
            bad += len(mism)
            start += len(g)
    # Decoding: ours (Decode, with and without special tokens) and WriteHF's against the reference,
    # on the ids of the hand-made strings and on the id sequences.
    dec_ids = refs[-len(hand):] + id_seqs
    dec_rows = rows[len(texts) - len(hand):]
    dec = 0
    for name, fn in [
        ("go Decode(ids, false)", lambda k, ids: dec_rows[k]["decoded"]),
        ("go Decode(ids, true)", lambda k, ids: None),
        ("WriteHF dir decode", lambda k, ids: auto.decode(ids)),
    ]:
        skip = "true" in name
        m = 0
        for k, ids in enumerate(dec_ids):
            want = ref.decode(ids, skip_special_tokens=skip)
            got = dec_rows[k]["decoded_skip"] if skip else fn(k, ids)
            if got != want:
                m += 1
                if m <= 3:
                    print("    ", ids[:12], repr(got[:60]), repr(want[:60]))
        print(f"{name} vs transformers(gguf_file) decode: {m} mismatched of {len(dec_ids)} id sequences")
        dec += m
    chat = [{"role": "user", "content": "Hi"}]
    same_tmpl = auto.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        ref.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    print("WriteHF chat template renders as the GGUF's:", same_tmpl)
    bad += dec + (0 if same_tmpl else 1)
    # Cross-check with llama.cpp (llama-cpp-python, when it is importable): reported, not failed on,
    # since the reference of the issue is transformers.
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
        print("llama-cpp-python: not importable, cross-check skipped")
    if llama_cpp is not None:
        llm = llama_cpp.Llama(model_path=a.gguf, vocab_only=True, verbose=False)
        # llama.cpp's "smollm" pre-tokenizer isolates every \p{N} before GPT-2's pattern; transformers
        # does not. The same tokenizer.json with that split first explains a difference.
        from tokenizers import Regex, pre_tokenizers
        presplit = tokenizers.Tokenizer.from_file(os.path.join(hfdir, "tokenizer.json"))
        presplit.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        start = 0
        for gname, g in groups:
            mism = []
            for i in range(start, start + len(g)):
                got = llm.tokenize(texts[i].encode("utf-8"), add_bos=False, special=True)
                if got != ours[i]:
                    mism.append((i, got))
            unexplained = [(i, got) for i, got in mism if presplit.encode(texts[i]).ids != got]
            print(f"go vs llama.cpp (llama-cpp-python {llama_cpp.__version__}): {gname}: {len(mism)} mismatched of {len(g)} texts, "
                  f"{len(unexplained)} not explained by llama.cpp's digit split")
            for i, got in unexplained[:5]:
                print("   ", repr(texts[i][:120]), "\n     ours     ", ours[i][:40], "\n     llama.cpp", got[:40])
            start += len(g)
    if a.golden:
        g = [{"text": t, "ids": ref.encode(t), "decoded": ref.decode(ref.encode(t)),
              "decoded_skip": ref.decode(ref.encode(t), skip_special_tokens=True)} for t in golden_strings()]
        chat_prompt = ref.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        with open(a.golden, "w", encoding="utf-8") as f:
            json.dump({"source": "transformers " + __import__("transformers").__version__ +
                       " AutoTokenizer.from_pretrained(gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf)",
                       "chat_prompt_hi": chat_prompt, "strings": g}, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("wrote", a.golden)
    print("total mismatches:", bad)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
