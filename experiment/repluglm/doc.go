// Package repluglm is the recipe kind "replug_lm": RePlug's LM-supervised retrieval (Shi et al.
// 2023, "REPLUG: Retrieval-Augmented Black-Box Language Models", section 4, eq. 2-4) with a real
// frozen language model: a bi-encoder's query tower (model.init_from, e.g. all-MiniLM-L6-v2)
// trained so that its distribution over each training claim's top k abstracts,
//
//	P_R(d|x) = softmax_k(cos(q, d_k) / gamma)                   (eq. 2, gamma = replug_lm.tau_r)
//
// follows the frozen LM's (replug_lm.lm, e.g. SmolLM2-135M-Instruct) preference for them,
//
//	Q_LM(d|x,y) = softmax_k(log P_LM(y | d_k, x) / beta)        (eq. 3, beta = replug_lm.tau_lm)
//
// with y the claim's own text and x the instruction (replug_lm.instruction): the LM is asked how
// likely the claim is after each abstract. No label and no qrels enter training (the train
// split's judgments are never read; qrels only name which claims are in a split). The loss is
// losses.RePlugKL, mean_b KL(Q_LM || P_R) (its gradient on the scores (P_R - Q_LM) / gamma;
// the paper writes eq. 4 as KL(P_R || Q_LM), which has the same minimiser P_R = Q_LM).
//
// What differs from the paper, and why:
//   - the datastore is frozen, never refreshed: the passages are encoded once by the initial
//     passage tower and only the query tower's output changes (RePlug re-encodes the datastore
//     every T steps; here the trained query tower searches the zero-shot passage vectors, at
//     training and at test time);
//   - the k candidates of a claim are the initial (zero-shot) retriever's top k, fixed, so that
//     the LM scores each (claim, abstract) pair once (kept in <run>/lm_scores.tsv, verified on
//     every resume) instead of re-retrieving with the current query tower at every step.
//
// Stages: load (data, tokenizer, LM), open (run directory, bi-encoder), datastore (encode the
// corpus, rank the eval splits zero-shot), candidates, lm (score and cache, with a progress
// bar), train (experiment.RunPhase: checkpoints, resume), evaluate (runs/<split>.<system>.trec
// for bm25, zeroshot and replug, metrics.json).
//
// # Recipe section [replug_lm]
//
// The kind owns the [replug_lm] table (Config, config.go); it also reads [data], [tokenizer],
// [model] (init_from: the bi-encoder), [train] (steps, batch_size: claims per step, lr, ...),
// [index] (BM25's k1, b) and [eval] (systems among bm25, zeroshot, finetuned: the trained query
// tower, written as "replug"). Every key, its default and its meaning:
//
//	key                          default     meaning
//	replug_lm.lm                 ""          required: the frozen LM: a LLaMA GGUF with its tokenizer (SmolLM2-135M-Instruct)
//	replug_lm.top_k              8           k: abstracts per training claim (the zero-shot top k, fixed); 2..64
//	replug_lm.tau_r              0.05        gamma: P_R = softmax(cos / gamma) over the top k; > 0
//	replug_lm.tau_lm             1.0         beta: Q_LM = softmax(log P_LM(claim | abstract, x) / beta); > 0
//	replug_lm.abstract_tokens    224         LM tokens of an abstract (title first), cut at the end; 16..2048
//	replug_lm.claim_tokens       96          LM tokens of a claim, cut at the end; 4..256
//	replug_lm.instruction        "Claim:"    x: the text between the abstract (then "\n") and the claim
//	replug_lm.train_claims       0           the first n train claims (by id); 0: all
//	replug_lm.corpus_sample      0           retrieve from the eval splits' judged passages and n others; 0: the whole corpus
//	replug_lm.cache_every        16          claims scored between two writes of <run>/lm_scores.tsv; >= 1
//	replug_lm.lm_cache           ""          another run's lm_scores.tsv to start from (same LM and layout, else refused)
package repluglm
