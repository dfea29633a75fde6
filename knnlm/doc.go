// Package knnlm is the nearest-neighbour language model of Khandelwal et al. 2020
// ("Generalization through Memorization: Nearest Neighbor Language Models", ICLR 2020): a
// datastore of (key, value) pairs, one per position of a corpus, the key the decoder's context
// representation there (the input of the last layer's feed-forward block, after its norm) and
// the value the next token; at test time the k keys nearest the current context's key by
// squared L2 distance d give
//
//	p_kNN(v) = Σ_{i: v_i = v} exp(-d_i / T) / Σ_i exp(-d_i / T)        (the paper's eq. 2, T = temperature)
//	p(v)     = λ p_kNN(v) + (1 - λ) p_LM(v)                            (eq. 3)
//
// Store holds the keys (float32, or float16 at half the bytes) and values; its Search is exact
// (every key, blocked matrix products); NewHNSW indexes a store for approximate search
// (index/ann's HNSW over keys augmented so that inner product ranks as L2 does). KNNProbs and
// Interpolate are the two equations. The decoders that produce keys are the garden GPT-2
// (model.KeyRunner) and model.Llama (model.LlamaDecoder with keys).
package knnlm
