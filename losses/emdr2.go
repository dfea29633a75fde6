package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// EMDR2 trains the retriever by the marginal likelihood of the answer over its K latent
// passages, the reader's likelihoods held fixed: RAG-Sequence (RAGSequence) with each
// passage's sequence log-likelihood given as a constant.
//
//	p_R = softmax(s_b)                                    retriever's distribution over the K passages
//	L   = mean_b -log sum_k p_R,bk p_LM(y_b | d_bk, x_b)
//	    = mean_b -logsumexp_k( log softmax(s_b)_k + lmLogLik_bk )
//
// Inputs: s [B,K] retrieval logits (scores already divided by the retriever's temperature);
// lmLogLik [B,K] the reader's log-likelihood of the whole target given each passage,
// log p_LM(y | d_k, x) = sum_t log p(y_t | x, d_k, y_<t), same dtype (float32 or float64).
// lmLogLik is a constant (no gradient reaches the reader through it). The gradient on s_b is
// (p_R,b - gamma_b) / B, gamma the posterior over the passages given the answer
// (RAGPosterior): the retriever is pulled towards the passages that explain the answer, in
// proportion to its own prior on them, which is the E-step/M-step reading of Sachan et al.
//
// Reference: Sachan et al. 2021, "End-to-End Training of Multi-Document Reader and Retriever
// for Open-Domain Question Answering" (EMDR²); Izacard et al. 2022, "Atlas", section 2.2
// ("End-to-end training of Multi-Document Reader and Retriever", the retriever's loss with the
// language model's output held fixed).
//
// Prefer it when the teacher should be weighted by the retriever's own belief (it sharpens what
// the retriever already finds, where PerplexityDistill and LeaveOneOutDistill match the reader's
// preference whatever the retriever thinks); train the reader jointly with RAGSequence on the
// same batch when the reader learns too.
func EMDR2(s, lmLogLik *G.Node) (*G.Node, error) {
	const loss = "EMDR2"
	if _, err := floatDtype(loss, []string{"s", "lmLogLik"}, s, lmLogLik); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "s", s, -1, -1); err != nil {
		return nil, err
	}
	b, k := s.Shape()[0], s.Shape()[1]
	if err := wantShape(loss, "lmLogLik", lmLogLik, b, k); err != nil {
		return nil, err
	}
	ll, err := stopGradient(lmLogLik)
	if err != nil {
		return nil, err
	}
	logw, err := logSoftmaxRows(s)
	if err != nil {
		return nil, err
	}
	joint, err := G.Add(logw, ll)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	lse, err := logSumExpRows(joint) // [B]: log p(y|x)
	if err != nil {
		return nil, err
	}
	return negMean(loss, lse)
}

// stopGradient passes a [R,C] node through as a constant: no gradient flows back into it.
func stopGradient(x *G.Node) (*G.Node, error) {
	op := &fop{
		name:    "stopGradient",
		inDims:  []int{2},
		outDims: 2,
		fwd:     func(in []arr) ([]float64, error) { return append([]float64(nil), in[0].data...), nil },
	}
	return op.apply(x)
}

// emdr2: Inputs.Scores [B*K] the retriever's scores, divided by Temperature into logits, Teacher [B,K] the reader's log-likelihoods
// of the target given each candidate.
func init() {
	Register(Spec{Name: "emdr2", Batch: Lists, Teacher: true, Build: func(in Inputs) (*G.Node, error) {
		s, t, err := listTeacher("emdr2", in)
		if err != nil {
			return nil, err
		}
		if err := validTau("emdr2", "Temperature", in.Temperature); err != nil {
			return nil, err
		}
		if in.Temperature != 1 {
			if s, err = G.HadamardProd(s, scalar(s.Dtype(), 1/in.Temperature)); err != nil {
				return nil, errors.Wrap(err, "losses: emdr2: scale by 1/tau")
			}
		}
		return EMDR2(s, t)
	}})
}
