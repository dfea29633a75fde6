"""Write tiny-bpe.gguf and tiny-bpe_golden.json, the fixture of tokenize/gguf_test.go.

    ../../.venv/bin/python gen_tiny_gguf.py   (in this directory; needs the SmolLM2 GGUF from
                                              bash tools/pretrained/get.sh SmolLM2-135M-Instruct)

tiny-bpe.gguf is written by gguf-py's GGUFWriter (so it is also a fixture the Go reader did not
write): a byte-level BPE vocabulary made of GPT-2's 256-character byte alphabet less the
characters of bytes 0x04, 0x13 and 0xF1 (which the tokenizer must then drop), the first 600
merges of SmolLM2-135M-Instruct (its merges never join digits, and tokenizer.ggml.pre is
"smollm"), control tokens <|endoftext|>, <|im_start|>, <|im_end|> and <|€|> (outside the byte
alphabet: transformers skips it as a special token), the user-defined token <think>, and
SmolLM2's ChatML template. A 2x32 F32 tensor is included so the file has a data section.
tiny-bpe_golden.json holds the ids transformers (AutoTokenizer.from_pretrained(gguf_file=...))
gives a list of strings, its decodings, and its chat-template rendering of "Hi".
"""
import json
import os

import numpy as np
import gguf
import transformers
from gguf import GGUFReader, GGUFWriter
from transformers import AutoTokenizer
from transformers.convert_slow_tokenizer import bytes_to_unicode

HERE = os.path.dirname(os.path.abspath(__file__))
SMOL = os.path.join(HERE, "../../pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")

r = GGUFReader(SMOL)
def field_strings(name):
    f = r.fields[name]
    return [bytes(f.parts[i]).decode() for i in f.data]
merges = field_strings("tokenizer.ggml.merges")[:600]
tmpl = bytes(r.fields["tokenizer.chat_template"].parts[-1]).decode()

bu = bytes_to_unicode()
missing = {0x04, 0x13, 0xF1}
tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|€|>", "<think>"]
types = [3, 3, 3, 3, 4]
tokens += [bu[b] for b in range(256) if b not in missing]
types += [1] * (256 - len(missing))
for m in merges:
    a, b = m.split(" ")
    tokens.append(a + b)
    types.append(1)
assert len(set(tokens)) == len(tokens)

path = os.path.join(HERE, "tiny-bpe.gguf")
w = GGUFWriter(path, "llama")
w.add_context_length(64)
w.add_embedding_length(32)
w.add_block_count(1)
w.add_feed_forward_length(64)
w.add_head_count(2)
w.add_head_count_kv(1)
w.add_layer_norm_rms_eps(1e-5)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("smollm")
w.add_token_list(tokens)
w.add_token_types(types)
w.add_token_merges(merges)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_unk_token_id(0)
w.add_pad_token_id(2)
w.add_add_bos_token(False)
w.add_chat_template(tmpl)
w.add_tensor("fixture.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

tok = AutoTokenizer.from_pretrained(HERE, gguf_file="tiny-bpe.gguf")
strings = [
    "", "the", "Hello world", "Hello world 12345 x", " leading and trailing ", "  a\n\n b  ", "\t\ttabs\n",
    "don't stop, it's I'M we'll they'd 've 're", "café 🤗 ∑ 日本", "\x04\x13 dropped bytes\x04",
    "\U00040000 uses 0xF1", "<|im_start|>user\nhi<|im_end|>\n", "<|im_start|><|im_end|><|endoftext|>",
    "<|im_start", "x<think>y</think>", "<|€|> is not special", "numbers 3.14159 and 1,000,000",
    "a\u00a0b\u3000c\u2028d", "trailing spaces   ", "\n", " ", "interesting thinking in the inner",
    "e\u0301 ñ ﬁ Ω", "👨‍👩‍👧 flag 🇫🇷", "https://example.org/a?b=c&d=1", "def f(x):\n    return x * 2\n",
]
rows = []
for s in strings:
    ids = tok.encode(s)
    rows.append({"text": s, "ids": ids, "decoded": tok.decode(ids), "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
out = {
    "source": f"transformers {transformers.__version__}, gguf {gguf.__version__ if hasattr(gguf, '__version__') else '0.19.0'}: "
              "AutoTokenizer.from_pretrained(testdata, gguf_file='tiny-bpe.gguf')",
    "vocab_size": len(tokens),
    "chat_prompt_hi": tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True),
    "strings": rows,
}
with open(os.path.join(HERE, "tiny-bpe_golden.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=0)
    f.write("\n")
print(len(tokens), "tokens,", os.path.getsize(path), "bytes")
