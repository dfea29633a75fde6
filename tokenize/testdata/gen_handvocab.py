"""Writes handvocab_golden.json: the ids transformers' AutoTokenizer gives texts with
handvocab/vocab.txt and the tokenizer_config.json / special_tokens_map.json of each variant below
(no tokenizer.json, so transformers builds its BertTokenizer from vocab.txt).

    ../../.venv/bin/python gen_handvocab.py      # from tokenize/testdata (tools/pyenv/setup.sh)
"""
import json, os, shutil, tempfile

import transformers
from transformers import AutoTokenizer

here = os.path.dirname(os.path.abspath(__file__))
texts = json.load(open(os.path.join(here, "hand_strings.json"), encoding="utf-8"))
texts += [
    "Hello [MASK] world",
    "The Model <ctx> train [unused0]",
    "café über naïve 北京 中文",
    "CAFÉ ÜBER NAÏVE",
    "x" * 100,
    "x" * 101,
    "Don't stop! 3.14$ (big) ~cool~",
    "T\u0301he Mo\u0308del",
    "unaffable token word the quick brown fox",
    "",
    "   ",
]
variants = [
    {"name": "uncased", "tokenizer_config": {"do_lower_case": True, "tokenizer_class": "BertTokenizer"},
     "special_tokens_map": None},
    {"name": "cased", "tokenizer_config": {"do_lower_case": False, "tokenize_chinese_chars": False,
                                           "tokenizer_class": "BertTokenizer",
                                           "additional_special_tokens": ["<ctx>"]},
     "special_tokens_map": None},
    {"name": "strip", "tokenizer_config": {"do_lower_case": False, "strip_accents": True, "unk_token": "[UNK]",
                                          "tokenizer_class": "BertTokenizerFast"},
     "special_tokens_map": {"unk_token": {"content": "[unused0]", "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False},
                            "cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]"}},
]
out = {"transformers": transformers.__version__, "texts": texts, "variants": []}
for v in variants:
    d = tempfile.mkdtemp()
    shutil.copy(os.path.join(here, "handvocab", "vocab.txt"), d)
    json.dump(v["tokenizer_config"], open(os.path.join(d, "tokenizer_config.json"), "w"))
    if v["special_tokens_map"] is not None:
        json.dump(v["special_tokens_map"], open(os.path.join(d, "special_tokens_map.json"), "w"))
    tok = AutoTokenizer.from_pretrained(d)
    ids = [tok(t)["input_ids"] for t in texts]
    out["variants"].append(dict(v, vocab_size=len(tok), ids=ids))
    shutil.rmtree(d)
with open(os.path.join(here, "handvocab_golden.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
