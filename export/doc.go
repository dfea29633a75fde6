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
//	modules.json                       sentence-transformers: Transformer (root), Pooling (1_Pooling),
//	                                   and for cosine similarity Normalize (2_Normalize)
//	1_Pooling/config.json              pooling_mode_mean_tokens or pooling_mode_cls_token
//	2_Normalize/                       cosine only: empty (Normalize has no parameters), as
//	                                   sentence-transformers saves it; encode() then returns unit
//	                                   vectors, whose dot products are the cosine scores
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
//	                         additional_special_tokens; added_tokens_decoder (every added token
//	                         by id); model_max_length = reader.max_length
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
// # Self-RAG reader (selfrag runs)
//
// A selfrag run (experiment/selfrag/selfrag.go) exports its reflective reader in the reader layout
// above, its vocabulary grown by Self-RAG's seven reflection tokens (Asai et al. 2024;
// tokenize.ReflectionTokens, model.GrowVocab), with no retriever/ (the run retrieves with BM25 and
// never trains its bi-encoder):
//
//	config.json              vocab_size = the grown vocabulary (reflection ids included)
//	tokenizer.json           added_tokens holds [Retrieve] [No Retrieve] [Relevant] [Irrelevant]
//	                         [Fully supported] [Partially supported] [No support] as special tokens at
//	                         their ids (the last seven rows of transformer.wte.weight in a selfrag run)
//	tokenizer_config.json    additional_special_tokens and added_tokens_decoder (id -> token) list them
//	special_tokens_map.json  additional_special_tokens lists them
//	ragtrain.json            ReaderManifest of kind "selfrag": reflection_tokens (token, id), the
//	                         sequence layout, retrieval ("bm25 k1=... b=..."), decoding (SelfRAGDecoding:
//	                         row_length, top_k and the thresholds of selfrag.*), the source
//	README.md                the reflection tokens and ids, the sequence layout and the decoding policy
//
// A selfrag checkpoint saved before the reflective phase (checkpoint-reader_finetune-N, and the
// plain reader's copy in the run's plain/) holds the plain reader and no reflection tokens; it exports as a plain reader (kind "rag", no
// retriever/). OpenReader reads a selfrag export or run like a rag one; ReaderDir.ReflectionTokens
// lists the tokens and ids, which must be complete, special, within the reader's rows and (for an
// export) equal to ragtrain.json's, or OpenReader fails naming the token. Init needs a reader of
// the grown vocabulary: a plain-vocabulary reader fails on transformer.wte.weight with both
// shapes. So a plain rag recipe starts from a reflective reader exactly when its tokenizer is the
// export's (tokenizer.file = the export's tokenizer.json; otherwise reader.init_from fails at the
// first differing id): the reflection tokens keep their ids and rows and stay in the run's
// tokenizer and checkpoints, as unused special tokens of the plain reader.
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
// OpenBiEncoder reads an export, a Hugging Face BERT or sentence-transformers directory exactly
// as distributed, a bow tower directory, or a run or checkpoint directory; Init copies its
// tensors into a model bit for bit, or fails with a *MismatchError naming every missing,
// unexpected and wrongly shaped tensor with both shapes. Export -> import is bit-exact. A Hugging
// Face directory is read as transformers and sentence-transformers read it:
//
//	weights        model.safetensors, or when it is absent pytorch_model.bin (torch.save's zip
//	               format or the legacy format; the pickle is decoded with gopickle and only a
//	               state dict of tensors is accepted; every size is checked against the file
//	               before anything is allocated); BertModel or BertFor* names ("bert." removed),
//	               F32/F16/BF16/F64 converted to float32; the pooler, pre-training heads and
//	               position_ids buffer skipped. Sharded checkpoints are refused.
//	config.json    a BertModel this toolkit computes exactly: model_type "bert", hidden_act
//	               "gelu" (exact erf GELU), position_embedding_type "absolute", type_vocab_size 2,
//	               layer_norm_eps 1e-12, is_decoder and add_cross_attention false; anything else
//	               is one error naming the file, the field, its value and what is computed
//	modules.json   Transformer (path "" or a subdirectory holding config.json, the weights and
//	               the tokenizer), Pooling (any directory; mean or cls in the legacy
//	               pooling_mode_* or the pooling_mode format; max, mean_sqrt_len_tokens,
//	               weightedmean, lasttoken and concatenations are refused), optionally Normalize
//	               (BiEncoderDir.Normalize); any other module (Dense, LayerNorm, ...) is refused,
//	               naming modules.json and the module. Type names of sentence-transformers 2 to 6
//	               are recognised.
//	similarity     config_sentence_transformers.json's similarity_fn_name, "cosine" (the
//	               library's default) when absent in a sentence-transformers directory
//	max length     sentence_bert_config.json's max_seq_length, else (sentence-transformers 6)
//	               min(model_max_length, max_position_embeddings)
//	tokenizer      BiEncoderDir.LoadTokenizer: tokenizer.json, else vocab.txt with
//	               tokenizer_config.json and special_tokens_map.json (tokenize.LoadDir)
//
// OpenCrossEncoder reads a cross-encoder export, a BertForSequenceClassification directory or a
// reranker run, and also an encoder body (a BertModel / sentence-transformers directory or a
// shared-tower bi-encoder): Init then copies the encoder and BERT's pooler when present, and
// CrossEncoderDir.Fresh names the head parameters it leaves to the model's initialisation.
//
// # Adding a model kind
//
// Each kind is one file: it registers its exporter with register(kind, f) in an init function
// and offers its own Open*/Init pair for init_from (biencoder.go, crossencoder.go, reader.go),
// reusing writeTokenizerFiles, writeSafetensorsPT, writeDir and tensorSet/MismatchError
// (selfrag.go reuses reader.go's layout the same way).
//
// Not for: model hubs or downloads, arbitrary PyTorch pickles (only state dicts of tensors are
// read from pytorch_model.bin), sharded checkpoints, quantised formats, or training: the package
// moves weights and never computes gradients.
package export
