package losses

import (
	G "gorgonia.org/gorgonia"
)

// RePlugKL trains the retriever to rank passages the way a frozen language model finds them
// useful: it pulls the retrieval distribution towards the LM's preference distribution.
//
//	p_R  = softmax(s_b / tauR)          retriever's distribution over the K passages
//	p_LM = softmax(lmLogLik_b / tauLM)  LM preference, a constant (no gradient into the LM)
//	L    = mean_b KL(p_LM || p_R) = mean_b sum_k p_LM,bk (log p_LM,bk - log p_R,bk)
//
// Inputs: s [B,K] retriever scores of K retrieved passages per query; lmLogLik [B,K] the LM's
// log-likelihood of the ground-truth continuation given each passage (log P_LM(y | d_k, x)),
// same dtype (float32 or float64); temperatures tauR, tauLM > 0. lmLogLik receives no
// gradient and passes none to whatever computed it. The gradient on s_b is
// (p_R,b - p_LM,b) / (tauR B). Softmax and log-softmax are max-subtracted and 0 log 0 = 0, so
// log-likelihoods hundreds of nats apart (long continuations) give no Inf or NaN.
//
// Reference: Shi et al. 2023, "REPLUG: Retrieval-Augmented Black-Box Language Models", eq. 3-4
// (LM-Supervised Retrieval, REPLUG LSR).
//
// Prefer it when the reader is a black box that can only score continuations: unlike
// RAGSequence and RAGToken it needs no gradient from the generator, and it trains only the
// retriever. It is KLDistill with the language model as the teacher.
func RePlugKL(s, lmLogLik *G.Node, tauR, tauLM float64) (*G.Node, error) {
	return softKL("RePlugKL", [4]string{"s", "lmLogLik", "tauR", "tauLM"}, s, lmLogLik, tauR, tauLM)
}
