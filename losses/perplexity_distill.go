package losses

import (
	G "gorgonia.org/gorgonia"
)

// PerplexityDistill trains the retriever towards the reader's preference over its K passages:
// KL(softmax(lmLogLik_b / tauLM) || softmax(s_b / tauR)), the reader's log-likelihood of the
// answer given each passage as the teacher score. It is RePlugKL under the name Atlas gives it
// (Izacard et al. 2022, section 2.2, "Perplexity Distillation", p_PDist); see RePlugKL for the
// formula, the inputs and the gradient.
//
// Prefer it to LeaveOneOutDistill when the reader reads one passage at a time (it costs one
// reader pass per passage and needs no K-passage context); to AttentionDistill when the
// answer's likelihood is affordable (it measures what helps the answer, not what is read).
func PerplexityDistill(s, lmLogLik *G.Node, tauR, tauLM float64) (*G.Node, error) {
	return RePlugKL(s, lmLogLik, tauR, tauLM)
}

// perplexity_distill: Inputs.Scores [B*K] the retriever's scores, Teacher [B,K] the reader's
// log-likelihoods of the answer given each candidate, TeacherTemperature their temperature.
func init() { registerListTeacher("perplexity_distill", PerplexityDistill) }
