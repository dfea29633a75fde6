// Package tokenize turns text into the fixed-shape id batches the encoders
// read: BERT-style WordPiece tokenizers loaded from, trained into, and saved
// as Hugging Face tokenizer.json files.
//
// A Tokenizer implements the BERT pipeline end to end in Go:
//
//   - BertNormalizer: drop control characters, map whitespace to ' ', put
//     spaces around CJK ideographs, strip accents (NFD, then drop Mn marks)
//     and lowercase;
//   - BertPreTokenizer: split on whitespace, isolate each punctuation rune;
//   - WordPiece: greedy longest-match-first over the vocabulary, continuing
//     pieces prefixed "##", a word with no full cover becoming [UNK]
//     (Wu et al. 2016, "Google's Neural Machine Translation System", §4.1;
//     Devlin et al. 2019, "BERT", §3);
//   - added (special) tokens, matched on the raw text before normalisation,
//     leftmost-longest, and never split;
//   - the post-processor layout [CLS] A [SEP] and [CLS] A [SEP] B [SEP].
//
// The ids equal those of the Hugging Face tokenizers library and of
// github.com/sugarme/tokenizer for bert-base-uncased (tests compare both on
// the Cranfield collection). The encoding is done here rather than through
// sugarme because sugarme is about 40 times slower and ignores
// "strip_accents": null; sugarme's Save and Train are not usable (stubs, and
// output on stdout), so Save writes the JSON itself and Train is a
// deterministic port of the Hugging Face WordPieceTrainer (BPE merges with a
// "##" continuing prefix).
//
// LoadDir reads the tokenizer of a Hugging Face BERT directory as distributed: tokenizer.json
// when present, otherwise vocab.txt (LoadVocab, FromVocab) with the settings of
// tokenizer_config.json and special_tokens_map.json (do_lower_case, strip_accents,
// tokenize_chinese_chars, the special tokens), as transformers' BertTokenizer builds it; both
// routes give the same tokenizer (tests compare them on bert-base-uncased and all-MiniLM-L6-v2,
// and with transformers' ids on a hand-made vocabulary).
//
// Batches have fixed shapes: EncodeBatch and EncodePairBatch pad every row to
// the maxLen they are given, so a batch of B texts is B×L ids, a B×L float32
// mask (1 real, 0 padding) and B×L segment ids.
//
// GGUFTokenizer is the other family here: the byte-level BPE tokenizer
// (GPT-2's byte alphabet and pre-tokenizer pattern, Sennrich et al. 2016
// merges) stored in a GGUF file's tokenizer.ggml.* metadata, as
// SmolLM2-135M-Instruct ships it. LoadGGUFTokenizer builds it as
// transformers builds it from the same file (0 mismatched ids on SciFact and
// 1,000 hand-made strings, tools/interop/gguf_tokenizer.py); ChatPrompt
// renders its ChatML template; WriteHF saves it as tokenizer.json and
// tokenizer_config.json. See gguf.go.
//
// Not for: SentencePiece or other model families; BPE from tokenizer.json; offsets
// and alignments; dynamic padding. Load accepts only the BERT layout
// (BertNormalizer, BertPreTokenizer, WordPiece, BertProcessing or the
// equivalent TemplateProcessing) and reports anything else as an error
// instead of encoding it differently.
package tokenize
