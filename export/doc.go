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
// # Cross-encoder (reranker)
//
// A reranker model (run/reranker-<loss>, or one of its checkpoints) exports as a Hugging Face
// BertForSequenceClassification with one label, which AutoModelForSequenceClassification and
// sentence-transformers' CrossEncoder load; its model must pool by [CLS] (model.pooling = "cls",
// the layout BERT's pooler reads; a mean-pooled cross-encoder is refused). The export root holds:
//
//	model.safetensors        F32, {"format": "pt"}: bert.embeddings.*, bert.encoder.layer.N.* (BertModel
//	                         names under "bert."), bert.pooler.dense.weight [H,H] and .bias [H],
//	                         classifier.weight [1,H], classifier.bias [1] (model.HFCrossEncoderName)
//	config.json              BertConfig as above with architectures ["BertForSequenceClassification"],
//	                         num_labels 1, id2label {"0": "LABEL_0"}, label2id, classifier_dropout null,
//	                         sentence_transformers.activation_fn Identity (scores are the raw logits)
//	tokenizer.json, tokenizer_config.json, special_tokens_map.json   as above; model_max_length = the
//	                         pair length [CLS] query [SEP] passage [SEP]
//	ragtrain.json            CrossEncoderManifest: loss, first stage, list size and depth, pretraining
//	                         steps, init_from, and the checkpoint it came from
//	README.md                the same in words: which first stage trained it, how to load it
//
// and computes, for a pair's token ids, token types (0 for [CLS] query [SEP], 1 for passage
// [SEP]) and attention mask, score = classifier(tanh(pooler.dense(h_[CLS]))) with h the BERT
// encoder's last hidden states. A reranker run directory holds one model per loss, so Export
// asks for one of run/reranker-<loss> instead of choosing. OpenCrossEncoder reads an export, any
// BertForSequenceClassification directory with one label, or a reranker model or checkpoint
// directory; Init copies it bit for bit or fails with a *MismatchError.
//
// # Reader (rag runs)
//
// A rag run exports its reader as a Hugging Face GPT2LMHeadModel at the root (model.Reader is
// GPT-2's architecture with the exact GELU, so AutoModelForCausalLM computes the same
// log-probabilities) and its bi-encoder as a bi-encoder export in retriever/:
//
//	model.safetensors        F32, {"format": "pt"}: transformer.wte.weight [V,H], transformer.wpe.weight
//	                         [P,H], transformer.h.N.{ln_1,ln_2}.{weight,bias} [H],
//	                         transformer.h.N.attn.c_attn.weight [H,3H] (Conv1D [in,out]: q|k|v, our
//	                         [out,in] weights transposed) and .bias [3H], attn.c_proj [H,H] and [H],
//	                         mlp.c_fc [H,F] and [F], mlp.c_proj [F,H] and [H], transformer.ln_f.{weight,bias};
//	                         no lm_head.weight: it is tied to transformer.wte.weight, and save_pretrained
//	                         leaves tied weights out the same way
//	config.json              GPT2Config: model_type "gpt2", architectures ["GPT2LMHeadModel"], vocab_size,
//	                         n_embd, n_layer, n_head, n_inner, n_positions = n_ctx = reader.max_length,
//	                         activation_function "gelu" (exact erf GELU), layer_norm_epsilon 1e-5,
//	                         resid/embd/attn_pdrop = reader.dropout, tie_word_embeddings true,
//	                         bos/eos/pad_token_id = [CLS]/[SEP]/[PAD]
//	generation_config.json   bos/eos/pad_token_id, max_new_tokens = reader.max_answer_tokens,
//	                         do_sample false, num_beams 1 (greedy, as the run evaluates)
//	tokenizer.json           the run's WordPiece tokenizer with its added special tokens (<ctx>, </ctx>,
//	                         Self-RAG's reflection tokens when present)
//	tokenizer_config.json    PreTrainedTokenizerFast; bos [CLS], eos [SEP], pad [PAD];
//	                         additional_special_tokens; model_max_length = reader.max_length
//	special_tokens_map.json  the same special tokens
//	ragtrain.json            ReaderManifest: max_length, max_answer_tokens, the prompt layout, the source
//	retriever/               the bi-encoder (layout above)
//
// A prompt is "[CLS] <ctx> passage </ctx> question cloze"; tokenizer.json's post-processor is
// BERT's ([CLS] text [SEP]), so encode with add_special_tokens=False and prepend [CLS].
// OpenReader reads such an export, a Hugging Face GPT-2 directory (GPT2LMHeadModel or GPT2Model
// names; attention-mask buffers skipped; an lm_head.weight must equal wte) whose config the
// reader computes exactly (activation_function "gelu": GPT-2's default "gelu_new" is refused,
// layer_norm_epsilon 1e-5), or a rag run directory; Init copies it bit for bit (c_attn split and
// transposed back) or fails with a *MismatchError naming the GPT-2 tensor and both shapes.
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
// and offers its own Open*/Init pair for init_from (biencoder.go, crossencoder.go, reader.go),
// reusing writeTokenizerFiles, writeSafetensorsPT, writeDir and tensorSet/MismatchError.
//
// Not for: model hubs or downloads, PyTorch pickles (pytorch_model.bin), sharded checkpoints,
// quantised formats, or training: the package moves weights and never computes gradients.
package export
