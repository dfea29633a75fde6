"""Builds a tiny random BertModel and saves it as sentence-transformers models the way they are
distributed, then writes what sentence-transformers computes for a few texts. Run by
hf_python_test.go (TestSentenceTransformersPython):

    python st_tiny.py VOCAB_TXT OUT_DIR

OUT_DIR receives
  st_safe/    SentenceTransformer(Transformer + Pooling mean + Normalize).save(): model.safetensors,
              tokenizer.json, the sentence-transformers files of the installed release
  st_bin/     the same model with its weights as pytorch_model.bin (torch.save of the state dict, zip
              format) instead of model.safetensors, and vocab.txt + tokenizer_config.json instead of
              tokenizer.json
  st_legacy/  st_bin with pytorch_model.bin in torch's legacy format
  expected.json  {"versions", "texts", "dirs": {name: {"ids": [[...]], "vectors": [[...]]}}}: the
              token ids of each text (truncated at max_seq_length) and SentenceTransformer(dir).encode()
              of each directory, loaded back from disk
"""
import json
import os
import shutil
import sys

import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import modules as M
from transformers import AutoTokenizer, BertConfig, BertModel

vocab_path, out = sys.argv[1], sys.argv[2]
texts = [
    "the quick brown fox",
    "Hello world, the Model is training!",
    "café über naïve 北京 中文",
    "unaffable token word " * 6,  # longer than max_seq_length
    "x",
    "Don't stop! 3.14$ (big) ~cool~ [MASK]",
]
max_seq_length = 24

torch.manual_seed(0)
hf = os.path.join(out, "hf")
os.makedirs(hf)
shutil.copy(vocab_path, os.path.join(hf, "vocab.txt"))
with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
    json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer"}, f)
tok = AutoTokenizer.from_pretrained(hf)
cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id)
bert = BertModel(cfg)  # with the pooler, which sentence-transformers (and the Go reader) skip
with torch.no_grad():  # weights of some size, so that the layers matter
    for p in bert.parameters():
        p.normal_(0, 0.5)
bert.eval()
bert.save_pretrained(hf)
tok.save_pretrained(hf)

st = SentenceTransformer(modules=[M.Transformer(hf, max_seq_length=max_seq_length),
                                  M.Pooling(32, "mean"), M.Normalize()], device="cpu")
safe = os.path.join(out, "st_safe")
st.save(safe)

state = st[0].auto_model.state_dict()
for name, legacy in [("st_bin", False), ("st_legacy", True)]:
    d = os.path.join(out, name)
    shutil.copytree(safe, d)
    os.remove(os.path.join(d, "model.safetensors"))
    torch.save(state, os.path.join(d, "pytorch_model.bin"), _use_new_zipfile_serialization=not legacy)
    os.remove(os.path.join(d, "tokenizer.json"))
    shutil.copy(vocab_path, os.path.join(d, "vocab.txt"))

result = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "sentence_transformers": sentence_transformers.__version__},
          "texts": texts, "max_seq_length": max_seq_length, "dirs": {}}
for name in ["st_safe", "st_bin", "st_legacy"]:
    d = os.path.join(out, name)
    m = SentenceTransformer(d, device="cpu")
    assert m.max_seq_length == max_seq_length, (name, m.max_seq_length)
    ids = m.tokenizer(texts, truncation=True, max_length=m.max_seq_length)["input_ids"]
    vec = m.encode(texts, convert_to_numpy=True, normalize_embeddings=False, batch_size=len(texts))
    result["dirs"][name] = {"ids": ids, "vectors": vec.astype("float64").tolist()}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(result, f)
