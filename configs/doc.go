// Package configs is the recipe schema: the TOML file that says what a run
// trains, on which data, with which model, loss, sampler, optimiser, index and
// evaluation. Load reads a recipe, fills every unset key with its default,
// resolves relative paths against the recipe file's directory and validates
// every value; WriteResolved writes the result (recipe.resolved.toml in a run
// directory), which loads back to an equal Recipe.
//
// The package is not for running anything: it does not read the data, build
// models or create run directories (see cmd/train). It checks only that the
// inputs a recipe names exist.
//
// # Errors
//
// Every error names the recipe file as given, the line and the key:
//
//	recipes/x.toml:12: unknown key "train.stpes" (did you mean "train.steps"?)
//	recipes/x.toml:30: train.batch_size: wrong type: got a string, want an integer
//	recipes/x.toml:30: train.batch_size: must be >= 2, got 1
//	recipes/x.toml:10: data.dir: stat /abs/datasets/cranfeld: no such file or directory
//
// Unknown keys, values of the wrong type, TOML syntax errors, missing inputs
// (data.dir with corpus.jsonl and queries.jsonl, qrels/<split>.tsv of every
// split named, tokenizer.file, model.init_from, reader.init_from, a rerank.first_stage path) and
// impossible values (the constraints in the table) are all errors. Floats must
// be finite. A key the file does not set has no line; a conflict between two
// keys is reported at the one the file sets.
//
// # Kinds
//
// kind says what a recipe trains. Kinds are registered with RegisterKind (each
// kind's package calls experiment.Register, which does, in its init), each with
// the shared sections it reads, the losses it trains, the keys of shared sections
// only some kinds read (KindSpec.Keys) and the sections it owns (KindSpec.Own:
// struct, defaults, validation and key table in the kind's package, e.g. [atlas]
// and [replug]); this package names no kind. Load rejects an unregistered kind, a
// section the file sets that the kind does not read, a key it does not read set
// away from off, and a loss the kind cannot train:
//
//	recipes/x.toml:12: section [selfrag] is not read by kind "retriever" (it reads: data, tokenizer, ...)
//	recipes/x.toml:20: loss.name: kind "retriever" cannot train "pointwise" (valid: "infonce")
//
// The top-level keys (kind, name, seed, output_dir) are read by every kind.
//
//   - retriever: data, tokenizer, model, loss, sampler, pretrain, train, index, eval;
//     loss.name "infonce" (in-batch softmax over positives, hard and in-batch negatives),
//     "matryoshka_infonce" (InfoNCE summed over the prefixes loss.dims, Kusupati et al. 2022;
//     needs loss.dims), "margin_mse" (the teacher's margin between a query's positive and its one
//     hard negative, Hofstätter et al. 2020; needs loss.teacher and sampler.hard_negatives = 1)
//     or "kl_distill" (the teacher's softmax over the query's positive and hard negatives; needs
//     loss.teacher and sampler.hard_negatives >= 1). A distillation run's pretrain phase trains
//     InfoNCE.
//   - reranker: data, tokenizer, model, pretrain, train, index, eval, rerank;
//     rerank.losses from "pairwise", "listwise", "pointwise" (one model per loss; [loss] is not read).
//   - rag: world, tokenizer, reader, model, loss, pretrain, train, index, rag;
//     loss.name "infonce" (the retriever's warm-up; [loss] also gives the similarity and temperature).
//   - selfrag: world, tokenizer, reader, model, loss, train, index, selfrag; loss.name "infonce".
//   - replug: world, tokenizer, reader, model, loss, pretrain, train, index, rag, replug (its own:
//     experiment/replug),
//     realm (checkpoint_every), index_refresh; loss.name "infonce".
//   - realm: world, tokenizer, reader, model, loss, pretrain, train, index, rag, realm,
//     index_refresh; loss.name "infonce".
//   - reader_lm: data, train, reader_lm and lora (its own: experiment/readerlm; no [tokenizer]:
//     the GGUF's).
//   - atlas: world, tokenizer, reader, model, loss, pretrain, train, index, rag, atlas (its own:
//     experiment/atlas),
//     realm (checkpoint_every), index_refresh; loss.name "infonce" (the systems train
//     "attention_distill", "emdr2", "perplexity_distill", "loo_distill").
//
// WriteResolved writes only the sections of the recipe's kind. A resolved
// recipe written before that (every section) still loads: in a file opening
// with the resolved header, a foreign section holding only defaults is accepted.
//
// # Paths
//
// output_dir, data.dir, tokenizer.file, model.init_from, reader.init_from, loss.teacher,
// loss.teacher_cache and rerank.first_stage
// (unless "bm25") are relative to the directory of the recipe file; absolute
// paths are kept. After Load they are absolute.
//
// # Keys
//
// Every key, its default and its meaning. L is the sequence length, H the
// hidden size, B the batch size, K the candidates per query.
//
//	key                                 default        meaning
//	kind                                "retriever"    what is trained: "retriever" (dense bi-encoder), "reranker" (cross-encoder), "rag", "selfrag", "replug", "realm"
//	name                                ""             run name, no path separators; "" means the recipe file's name without ".toml"; runs are <output_dir>/<name>-<timestamp>
//	seed                                42             seed of every random choice (init, sampling, dropout); >= 0
//	output_dir                          "runs"         directory below which run directories are created
//	data.dir                            ""             BEIR directory (corpus.jsonl, queries.jsonl, qrels/); required by the kinds reading [data] (retriever, reranker); the garden kinds (rag, selfrag, replug, realm) generate theirs from [world]
//	data.train_split                    "train"        training judgements, qrels/<train_split>.tsv; required
//	data.dev_split                      "dev"          development judgements (model selection, interpolation weight); "" for none
//	data.test_split                     "test"         held-out judgements; "" for none
//	data.title_field                    true           passage = title + " " + text (text alone when false)
//	tokenizer.file                      ""             tokenizer.json to load; exactly one of file and train
//	tokenizer.train                     false          train a WordPiece vocabulary on the corpus; exactly one of file and train
//	tokenizer.vocab_size                8000           trained vocabulary size, special tokens included; >= 100 when training
//	tokenizer.min_frequency             2              fewest occurrences for a trained word piece; >= 1 when training
//	tokenizer.lowercase                 true           lowercase before a trained tokenizer splits text
//	tokenizer.max_length                64             L: tokens per query or passage (reranker: per [CLS] query [SEP] passage [SEP] pair, the passage cut first), [CLS]/[SEP] included, longer texts truncated; >= 4
//	tokenizer.query_max_length          0              L of queries of a bi-encoder (kind retriever); 0 means max_length; else in [4, max_length]
//	tokenizer.dynamic_padding           false          pad each encoding batch to its longest text (length-sorted, bucketed) instead of to max_length; same vectors within float32 rounding
//	model.encoder                       "bow"          "bow" (mean of token embeddings, then a linear layer) or "transformer"
//	model.hidden                        128            H: embedding and output width; >= 1, a multiple of heads for the transformer
//	model.pooling                       "mean"         token states to one vector: "mean" (over unmasked tokens) or "cls"
//	model.shared_towers                 true           queries and passages share one encoder
//	model.layers                        2              Transformer blocks; >= 1
//	model.heads                         4              attention heads; >= 1
//	model.ffn                           512            feed-forward inner width; >= 1
//	model.dropout                       0.1            dropout probability in training; in [0, 1)
//	model.max_position                  512            learned positions; >= tokenizer.max_length for the transformer
//	model.init_from                     ""             directory whose weights initialise the model: a run directory (its latest checkpoint), an export of `train export`, or a Hugging Face BERT directory; for kind reranker also a BertModel / sentence-transformers body (encoder and pooler loaded, classifier fresh; [model] sizes left out are taken from its config.json); "" for random init
//	loss.name                           "infonce"      the training loss, one the kind trains (see Kinds): "infonce" for every kind that reads [loss]
//	loss.similarity                     "cosine"       query-passage score: "dot" or "cosine"
//	loss.temperature                    0.05           tau in softmax(s / tau); > 0
//	loss.dims                           []             matryoshka_infonce (needs it): the embedding prefixes trained, full dimension first, strictly descending, each in [1, output dimension]; each m below the full one is also evaluated as "finetuned@m" / "dense@m" (prefix re-normalised for cosine; TREC file runs/<split>.finetuned_d<m>.trec)
//	loss.dim_weights                    []             matryoshka_infonce: weight of each prefix's InfoNCE term, one per dim, each > 0; [] = all 1
//	loss.teacher                        ""             margin_mse, kl_distill, colbert_kl_distill, splade_margin_mse, splade_kl_distill (need it): the cross-encoder teacher, a reranker run's <run>/reranker-<loss> or an exported cross-encoder directory; its scores of every training pair are computed once before training and cached in <run>/teacher_scores.tsv by (query id, passage id, teacher sha256)
//	loss.teacher_temperature            1.0            tau_T: kl_distill (colbert_kl_distill, splade_kl_distill) matches softmax(s / temperature) to softmax(t / teacher_temperature); margin_mse (splade_margin_mse) matches s+ - s- to (t+ - t-) * temperature / teacher_temperature; > 0
//	loss.teacher_cache                  ""             a teacher_scores.tsv of an earlier run, read before scoring and written back after (a rerun with the same teacher scores nothing); a file of another teacher is refused; "" = the run directory's only
//	loss.infonce_weight                 0.0            margin_mse, kl_distill, splade_margin_mse, splade_kl_distill (not colbert_kl_distill): w in L = L_distill + w * InfoNCE, an InfoNCE term over the batch's in-batch and hard negatives (the labels) at loss.temperature, false negatives masked by sampler.false_negatives; 0 = the teacher's scores alone; >= 0
//	loss.teacher_bm25_weight            0.0            the distillation losses (loss.teacher): beta in t(q,p) = ce(q,p) + beta * bm25(q,p), the teacher's score plus beta times the pair's BM25 score (0 when no term is shared); choose it on dev (tools/treceval -linear); the cache keeps ce alone; >= 0
//	sampler.hard_negatives              1              mined negatives per query; >= 0
//	sampler.negative_source             "bm25"         ranking the negatives are mined from: "bm25", "dense" (the model before training, e.g. the init_from checkpoint), "bm25+dense" (both interleaved) or "dense_refresh" (the model being trained, re-mined every refresh_every steps); judged-relevant passages excluded
//	sampler.refresh_every               0              negative_source "dense_refresh" (needs it, >= 1): re-encode the corpus with the model being trained and re-mine the negatives every this many [train] steps (ANCE); 0 = unset
//	sampler.negative_margin             0.0            negative_source "dense_refresh": drop a mined candidate d of (q, p) when s(q,d) > s(q,p) - margin (false-negative filter); counts in metrics.json "mining/dropped_margin"; 0 = off; >= 0
//	sampler.negative_relative           0.0            negative_source "dense_refresh": drop a mined candidate when s(q,d) > relative * s(q,p) (NV-Retriever TopK-PercPos, e.g. 0.95), after the margin; counts in "mining/dropped_relative"; 0 = off; in [0, 1]
//	sampler.negative_window             [1, 30]        [first, last]: 1-based inclusive ranks to mine from; 1 <= first <= last, last - first + 1 >= hard_negatives
//	sampler.negative_strategy           "random"       "top" (best-ranked non-relevant in the window) or "random" (uniform in the window)
//	sampler.false_negatives             "mask"         "mask" (drop an in-batch passage judged relevant to another query from that query's softmax) or "defer" (move the example to a later batch); kind colbert: default "defer" (its runs before it read the key), "mask" for colbert_contrastive only
//	pretrain.steps                      0              independent-cropping steps before supervised training (Contriever); kind reranker: cropping-list steps (a span of a passage as the query, the passage as its positive); 0 = off; >= 0
//	pretrain.batch_size                 64             B for pretraining (kind reranker: lists per step); >= 2
//	pretrain.crop_min                   8              shortest cropped span in tokens; >= 1
//	pretrain.crop_max                   32             longest cropped span in tokens; >= crop_min
//	train.steps                         1000           optimiser steps; >= 0
//	train.batch_size                    32             B: queries per batch; >= 2
//	train.mini_batch_size               0              kinds retriever, colbert: gradient caching (GradCache): encode the batch this many rows at a time, take the loss over the whole batch, back-propagate each chunk again; the gradient is the full batch's, memory the chunk's; must divide batch_size; 0 = off
//	train.dynamic_padding               false          kinds retriever (train phase), colbert (passages only; queries keep colbert.query_length): pad each batch's queries and passages to their longest text (rounded up to 32 tokens, at most query_max_length / max_length) instead of to the max lengths; one training graph per padded shape, cached (at most 4, together no more padded tokens than the fixed-padding graph); loss and gradients equal fixed padding's within float32 rounding (dropout masks differ); with mini_batch_size each chunk is padded to its own bucket (one graph pair per chunk length, at most max_length/32 a side)
//	train.lr                            0.001          peak AdamW learning rate; > 0
//	train.weight_decay                  0.01           AdamW decoupled weight decay; >= 0
//	train.warmup_steps                  100            linear warm-up steps; >= 0
//	train.schedule                      "linear"       decay after warm-up: "linear", "cosine" or "constant"
//	train.grad_clip                     1.0            largest global gradient norm; 0 = no clipping; >= 0
//	train.precision                     "float32"      matrix products: "float32", or "bf16" (bfloat16 inputs, float32 accumulation; model.BFloat16)
//	train.log_every                     50             steps between log lines; >= 1
//	train.checkpoint_every              500            steps between checkpoints; 0 = only at the end; >= 0
//	train.eval_every                    0              kind retriever, needs eval.select_metric: evaluate on data.dev_split every this many train steps and at the last (instead of at every checkpoint); each evaluation is a checkpoint (resume point), a "select" line of log.jsonl and a redraw of <run>/training_curve.png; the best is kept in <run>/best/, tested and exported; 0 = at the train checkpoints when select_metric is set; in [0, train.steps]
//	train.patience                      0              needs eval_every: stop the train phase after this many dev evaluations in a row without a gain of eval.select_metric (metrics.json "train/stopped_early_at"); 0 = never stop; >= 0
//	index.k1                            1.2            BM25 term-frequency saturation; >= 0
//	index.b                             0.75           BM25 length normalisation; in [0, 1]
//	index.stream_above                  0              kind retriever: a corpus of more than this many passages (non-blank lines of corpus.jsonl) is streamed, never all its text in memory: tokenized into <run>/corpus/tokens.tok, its texts in <run>/corpus/passages.txt, BM25 built document by document, the trained model's embeddings written in shards (<run>/corpus/shards) and searched shard by shard; the same rankings and metrics as loading it; with bm25 negatives only, no eval.select_metric, zeroshot, distillation, Matryoshka or -resume; 0 = never; >= 0
//	index.ann_threshold                 0              kind retriever: search a corpus of at least this many passages with HNSW (index/ann) instead of exact search: dense evaluation, dense and dense_refresh hard-negative mining, checkpoint selection (Matryoshka prefixes stay exact); approximate rankings, said in the output and metrics.json "dense/hnsw_*"; a streamed corpus (index.stream_above) is read back from its embedding shards into the graph for its dense evaluation, in memory (4·N·H bytes of vectors, 8·N·H while building); 0 = always exact; >= 0
//	index.ann_m                         16             HNSW's M: links per node on layers >= 1, 2·M on layer 0; in 2..127
//	index.ann_ef_construction           200            HNSW's candidate list while building; >= 1
//	index.ann_ef_search                 64             HNSW's candidate list while searching (max(ann_ef_search, k) for k hits); >= 1; the graph's levels are drawn with the recipe's seed
//	eval.splits                         ["test"]       splits evaluated, each a qrels/<split>.tsv
//	eval.systems                        ["bm25", "dense", "rrf"]  rankings compared: "bm25", "dense", "rrf" (fusion of bm25 and dense), "rerank" (first stage reranked); retriever also "zeroshot" (the model before training) and "finetuned" (= "dense")
//	eval.rrf_k                          60             k in RRF's sum of 1 / (k + rank) (Cormack et al. 2009); >= 1
//	eval.depth                          1000           hits retrieved per query; >= 1 and >= every metric's cutoff
//	eval.metrics                        ["nDCG@10", "MRR@10", "Recall@100", "Recall@1000", "MAP", "P@10"]  "<name>" or "<name>@<k>", name one of nDCG, MRR, Recall, P, MAP
//	eval.select_metric                  ""             choose the retriever checkpoint with the best dev value of this metric (one of eval.metrics) at every train checkpoint (every train.eval_every steps when set); kept in <run>/best/; "" evaluates the last step
//	eval.dev_corpus_sample              0              kind retriever, needs select_metric: rank the dev queries against every passage the dev qrels judge plus this many others drawn with the seed, not the whole corpus (faster; metrics.json "select/dev_corpus_passages" and the output say so); the final evaluation ranks the whole corpus; 0 = whole corpus; >= 0
//	world.seed                          1              seed of the garden world (kind "rag"); the same [world] gives byte-identical files; >= 0
//	world.gardeners                     400            gardeners; >= 2 and at most the surnames available
//	world.first_names                   20             size of the shared first-name pool; >= 1
//	world.towns                         16             values of "lives in"; >= 3
//	world.plants                        35             values of "grows"; >= 3
//	world.animals                       8              values of "keeps"; >= 3
//	world.zipf_exponent                 1.2            s: the gardener of popularity rank r is mentioned with probability proportional to r^-s; > 0
//	world.top_town_share                0.2            fraction of gardeners in the largest town; in [1/towns, 1)
//	world.biographies                   18000          pretraining biographies (each states 1-3 facts of one gardener); >= 0
//	world.news                          24000          pretraining news items (two gardeners, an unrelated value); >= 0
//	world.news_repeat                   0.5            fraction of news items that repeat their sentence (learned by copying); in [0, 1]
//	world.coverage                      0.85           fraction of gardeners with a datastore entry; in [0, 1]
//	world.datastore_news                3000           news items copied into the datastore; in [0, news]
//	world.window_words                  8              words per chunk of the "window" chunking; >= 1
//	world.updated_fraction              0.1            fraction of gardeners that move town in the world-updated/ variant (World.Updated); in [0, 1], 0 writes none
//	world.poisoned_fraction             0.1            fraction of entries stating a wrong value in the world-poisoned/ variant (World.Poisoned); in [0, 1], 0 writes none
//	reader.hidden                       128            H of the reader (decoder-only causal Transformer, tied embeddings); a multiple of heads
//	reader.layers                       2              reader Transformer blocks; >= 1
//	reader.heads                        4              reader attention heads; >= 1
//	reader.ffn                          512            reader feed-forward inner width; >= 1
//	reader.dropout                      0.1            reader dropout in training; in [0, 1)
//	reader.max_length                   48             L of reader sequences ([CLS] <ctx> passage </ctx> question cloze answer [SEP]); >= 8
//	reader.pretrain_passes              1              language-model passes over the world's corpus; 0 = off; >= 0
//	reader.pretrain_batch_size          64             rows of packed documents per pretraining step; >= 1
//	reader.pretrain_lr                  0.001          peak AdamW learning rate of LM pretraining; > 0
//	reader.finetune_steps               800            reader fine-tuning steps (loss on answer tokens only); >= 0
//	reader.finetune_batch_size          48             training questions per fine-tuning step; >= 1
//	reader.finetune_lr                  0.001          peak AdamW learning rate of fine-tuning; > 0
//	reader.replay                       16             rows of packed pretraining documents replayed in each fine-tuning step; >= 0
//	reader.closed_book_fraction         0.3            fraction of fine-tuning questions asked with an empty context; in [0, 1]
//	reader.counterfactual_fraction      1.0            fraction of the other fine-tuning questions whose passage states another value, the answer changed to match; in [0, 1]
//	reader.max_answer_tokens            3              most tokens greedy decoding generates before [SEP]; >= 1
//	reader.init_from                    ""             directory whose weights initialise the reader: a rag export of `train export` (GPT-2 layout), a Hugging Face GPT-2 directory (activation_function "gelu") or a rag run directory; same sizes and tokenizer as the run; "" for random init
//	rag.chunking                        "entry"        datastore chunking retrieved from: "entry", "sentence" or "window"
//	rag.candidate_source                "dense"        K candidates per question: "dense" (exact top K) or "bm25+dense" (BM25 top bm25_depth rescored by the dense retriever); kinds rag, replug and realm (REALM: rescored by the serving index)
//	rag.bm25_depth                      20             BM25 hits rescored under "bm25+dense"; >= top_k
//	rag.top_k                           4              K: candidates per question; >= 1
//	rag.candidate_mass                  "renormalize"  retrieval softmax over the K candidates ("renormalize") or the whole datastore ("full", sequence objective only)
//	rag.objectives                      ["sequence", "token"]  joint objectives, each trained from the same start: "sequence" (RAG-Sequence), "token" (RAG-Token)
//	rag.steps                           200            joint training steps per objective; >= 0
//	rag.batch_size                      16             training questions per joint step; >= 1
//	rag.lr                              0.0005         peak AdamW learning rate of joint training; > 0
//	rag.update_reader                   true           train the reader jointly with the query tower (false: the query tower alone)
//	rag.held_out_questions              true           joint training asks the questions of half the training gardeners, reader fine-tuning the other half
//	realm.systems                       ["supervised", "async", "sync"]  retrievers trained from one start and compared (kind "realm"): "supervised", "async"/"sync"/"off" (REALM joint training, index refreshed in that mode), "frozen" (document tower frozen; needs model.shared_towers = false)
//	realm.steps                         200            joint training steps per REALM system; >= 0
//	realm.batch_size                    16             training questions per REALM step; >= 1
//	realm.top_k                         4              K: candidates per question from the serving index; >= 1
//	realm.lr                            0.0005         peak AdamW learning rate of REALM training; > 0
//	realm.update_reader                 true           train the reader with both towers (false: the towers alone)
//	realm.in_batch_negatives            false          normalise each question's retrieval distribution over every candidate of the batch (the others' are negatives), not its own top_k
//	realm.passage_lr_scale              1.0            the passage tower's learning rate is realm.lr times this (systems that train it); > 0
//	realm.clip_per_tower                false          clip the passage tower's gradient by its own norm (train.grad_clip), apart from the query tower's and the reader's
//	realm.passage_warmup_steps          0              the passage tower stays frozen for the first steps of those systems; >= 0
//	realm.checkpoint_every              50             steps between checkpoints of a REALM or RePlug phase (resume points); 0 = only at its end; >= 0
//	realm.seeds                         []             train each REALM system but "supervised" once per seed from the same start and report each seed's metrics ("<phase>_seed<S>") and their mean and sd; the first must be seed; distinct, each >= 0; [] = once, at seed
//	index_refresh.mode                  "async"        "async" (re-encode in the background), "sync" (training waits) or "off"; read by replug.towers = "both"
//	index_refresh.refresh_every         10             refresh period in training steps; >= 1
//	index_refresh.workers               1              encoding goroutines of one refresh; >= 1
//	index_refresh.swap_after            0              async: install a refresh started at step s exactly at step s + swap_after (deterministic); 0 = when encoded; < refresh_every
package configs
