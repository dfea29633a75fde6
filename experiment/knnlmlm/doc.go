// Package knnlmlm is the recipe kind "knnlm_lm": the nearest-neighbour language model of
// Khandelwal et al. 2020 ("Generalization through Memorization: Nearest Neighbor Language
// Models", ICLR 2020) on real text with a frozen pretrained LLaMA (knnlm_lm.lm, e.g.
// SmolLM2-135M-Instruct) over a BEIR corpus (SciFact's abstracts): issue 41, item 3.
//
// The abstracts split three ways: every abstract a dev claim cites (qrels/<data.dev_split>.tsv)
// or a test claim cites (qrels/<data.test_split>.tsv; one cited by both is a test abstract) is
// held out of the datastore; the others (corpus order, the first knnlm_lm.corpus_cap of them)
// make the datastore. Each abstract is the LM's tokens of title + " " + text (data.title_field),
// no BOS, cut at knnlm_lm.abstract_tokens; its first token is not predicted. The datastore
// (knnlm.BuildLlama) holds one pair per position t of every datastore abstract but its last:
// key = the input of the last layer's feed-forward block after its norm [Hidden] (the paper's
// section 3), value = token t+1, keys float32 or float16 (knnlm_lm.precision). The held-out
// abstracts are scored by
//
//	p_kNN(v) = Σ_{i in the k nearest: v_i = v} exp(-d_i / T) / Σ_i exp(-d_i / T)   (eq. 2; d the squared L2 distance)
//	p(v)     = λ p_kNN(v) + (1 - λ) p_LM(v)                                        (eq. 3)
//
// with k = knnlm_lm.k nearest keys from an exact search (every key) or HNSW
// (knnlm_lm.search). T and λ are chosen together on the dev abstracts' perplexity among
// knnlm_lm.temperatures x ({0} ∪ knnlm_lm.lambdas); the test abstracts' perplexity is
// reported at that choice against λ = 0 (the LM alone), split by the target token's count
// among the datastore's values (0, 1-9, 10-99, 100-999, 1000-9999, >= 10000).
//
// Resumable: the datastore is built in shards of knnlm_lm.shard_docs abstracts, each shard
// and then <run>/datastore/manifest.json written atomically; a resumed run (-resume) verifies
// the shards the manifest lists (SHA-256, and the hash of the LM file, abstracts, token bound,
// precision and shard size) and builds from the first one missing. The scoring (hours at full
// size: an exact search of the datastore per held-out token) writes each split's sums to
// <run>/scoring/<split>.json after every abstract, atomically, with the hash of what they are
// of (the datastore, the split's abstracts and tokens, k, the search, the seed, both grids); a
// resumed run continues from the next abstract with the same sums, bit for bit, and refuses a
// state of anything else. Progress bars: datastore, dev, test.
//
// Outputs: <run>/datastore/, <run>/scoring/, log.jsonl (a line per shard built, per (T, λ)
// scored and the choice), metrics.json: lm/ppl_dev, lm/ppl_test, knnlm/ppl_dev, knnlm/ppl_test (at the
// choice), knnlm/lambda, knnlm/temperature, knnlm/k, knnlm/ppl_test.lambda=<λ> (each λ at the
// chosen T), lm/ppl_test.freq<bin> and knnlm/ppl_test.freq<bin>, eval/test_tokens.freq<bin>,
// datastore/pairs, datastore/bytes (keys, norms, values), datastore/index_bytes (the searcher,
// HNSW graph included), lm/params, lm/bytes_float32 (in memory), lm/bytes_file (the GGUF),
// knnlm/searches_per_token (1), lm/seconds_per_token, knnlm/search_seconds_per_token,
// knnlm/seconds_per_token (LM + search), datastore/build_seconds_per_token (when this run
// built shards), knnlm/nearest_dist_test (mean squared distance to the nearest key: the scale
// T is read against).
//
// # Recipe section [knnlm_lm]
//
// The kind reads [data] (dir, dev_split, test_split, title_field) and owns [knnlm_lm] (Config,
// config.go). Every key, its default and its meaning:
//
//	key                            default            meaning
//	knnlm_lm.lm                    ""                 required: the frozen LM, a LLaMA GGUF with its tokenizer
//	knnlm_lm.k                     1024               neighbours searched per token; 1..4096
//	knnlm_lm.temperatures          [1.0]              grid of T (chosen on dev); each > 0, distinct, at most 64
//	knnlm_lm.lambdas               [0.1, 0.25, 0.5]   grid of λ (chosen on dev; 0 always scored); each in [0, 1]
//	knnlm_lm.precision             "float16"          keys: "float32" or "float16"
//	knnlm_lm.search                "exact"            "exact" or "hnsw"
//	knnlm_lm.hnsw_m                16                 HNSW links per node; 2..127
//	knnlm_lm.hnsw_ef_construction  100                HNSW candidates while inserting; 1..65536
//	knnlm_lm.hnsw_ef_search        128                HNSW candidates while searching (at least k); 1..65536
//	knnlm_lm.abstract_tokens       512                LM tokens of an abstract, cut at the end; 2..8192 and <= the LM's context
//	knnlm_lm.corpus_cap            0                  the first n datastore abstracts; 0: all
//	knnlm_lm.dev_docs              0                  the first n held-out dev abstracts scored; 0: all
//	knnlm_lm.test_docs             0                  the first n held-out test abstracts scored; 0: all
//	knnlm_lm.shard_docs            64                 abstracts per datastore shard; 1..4096
//	knnlm_lm.max_datastore_bytes   4294967296         bound on the datastore's bytes, checked before any pass; >= 1
package knnlmlm
