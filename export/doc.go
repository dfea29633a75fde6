// Package export writes trained models in the layouts serving stacks load directly (Hugging
// Face transformers, sentence-transformers, FAISS/pgvector ingestion) and reads such layouts
// back, so that a recipe can start from them (model.init_from).
//
// Export(run, out, opts) reads a run's latest checkpoint (package checkpoints) and dispatches on
// its config.json "kind" to the exporter of that model kind; `train export -run RUN -out DIR`
// calls it. Every export is written into a temporary sibling directory and renamed to out when
// complete. Its root holds ragtrain.json (Manifest): the kind, where each part lives, and the
// checkpoint it came from.
//
// # Bi-encoder, transformer encoder
//
// With shared towers the export root is one tower directory; with separate towers the root
// holds query/ and passage/, each a tower directory, and ragtrain.json names them. A transformer
// tower directory is a Hugging Face BertModel and a sentence-transformers model at once, so
// SentenceTransformer(dir) and AutoModel.from_pretrained(dir) load it:
//
//	model.safetensors                  F32, BertModel state-dict names (model.HFBertName), metadata
//	                                   {"format": "pt"}; no pooler (BertModel.from_pretrained
//	                                   initialises one and warns; sentence-transformers ignores it)
//	config.json                        BertConfig: model_type "bert", vocab_size, hidden_size,
//	                                   num_hidden_layers, num_attention_heads, intermediate_size,
//	                                   max_position_embeddings, type_vocab_size 2, hidden_act "gelu",
//	                                   layer_norm_eps 1e-12, position_embedding_type "absolute", pad_token_id
//	tokenizer.json                     the run's tokenizer (tokenize.Save)
//	tokenizer_config.json              BertTokenizer, do_lower_case, model_max_length = max_length
//	special_tokens_map.json            [CLS] [SEP] [PAD] [UNK] [MASK]
//	modules.json                       sentence-transformers: Transformer (root), Pooling (1_Pooling)
//	1_Pooling/config.json              pooling_mode_mean_tokens or pooling_mode_cls_token
//	sentence_bert_config.json          max_seq_length = max_length
//	config_sentence_transformers.json  similarity_fn_name "cosine" or "dot"
//
// # Bi-encoder, bow encoder
//
// No standard architecture computes the bow encoder, so a bow tower directory has its own
// documented layout, with the tokenizer files above and no sentence-transformers files:
//
//	model.safetensors   embeddings.word_embeddings.weight [V,H], dense.weight [H,H], dense.bias [H]
//	config.json         model_type "ragtrain-bow", vocab_size, hidden_size, pooling "mean",
//	                    hidden_dropout_prob, pad_token_id
//
// and computes, for token ids t_1..t_L with attention mask m (1 real, 0 padding; [CLS] and [SEP]
// are real tokens):
//
//	v = dense.weight · (Σ_i m_i E[t_i] / Σ_i m_i) + dense.bias,   E = embeddings.word_embeddings.weight
//
// (tools/parity/parity.py implements it in a few lines of PyTorch).
//
// # Corpus embeddings
//
// With Options.Embeddings the passage tower encodes the run's corpus as evaluation does and
// embeddings/ holds embeddings.npy (float32, little-endian, row-major [N, H], .npy version 1.0,
// byte-identical to numpy.save), ids.txt (N corpus ids, one per line, in row order) and
// manifest.json (EmbeddingsManifest: the SHA-256 of the passage tower's model.safetensors, the
// index version, whether rows are L2-normalised, the corpus file and its SHA-256).
//
// # Import
//
// OpenBiEncoder reads an export, a plain Hugging Face BERT directory (BertModel or BertFor*
// names, F32/F16/BF16/F64; the pooler and pre-training heads are skipped), a bow tower directory,
// or a run or checkpoint directory; Init copies its tensors into a model bit for bit, or fails
// with a *MismatchError naming every missing, unexpected and wrongly shaped tensor with both
// shapes. Export -> import is bit-exact.
//
// # Adding a model kind
//
// Each kind is one file: it registers its exporter with register(kind, f) in an init function
// and offers its own Open*/Init pair for init_from. The cross-encoder (BertForSequenceClassification
// layout) and the reader (GPT2LMHeadModel layout) follow their issues; they reuse bertConfig,
// writeTokenizerFiles, writeSafetensorsPT, writeDir and tensorSet/MismatchError.
//
// Not for: model hubs or downloads, PyTorch pickles (pytorch_model.bin), sharded checkpoints,
// quantised formats, or training: the package moves weights and never computes gradients.
package export
