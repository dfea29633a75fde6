package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// TokenNLL is the language-modelling cross-entropy with a target mask: the mean negative
// log-likelihood of the target tokens the mask keeps.
//
//	L = -sum_i mask_i logp_i / sum_i mask_i        (L = 0 when the mask keeps no token)
//
// Inputs: logp, the log-probabilities log p_theta(y_i | y_<i, x) of the target tokens (any
// shape, e.g. [M] entries from model.LMLogProb or [B,T]); mask, of the same shape, 1 for a
// token that counts and 0 for one that does not (padding; in reader fine-tuning every token
// that is not part of the answer: the context, the question). Positions with mask 0 are never
// read, so they may hold any value (-Inf included), and they receive zero gradient; the
// gradient on a kept logp_i is -1/sum(mask). The mean is over the batch's kept tokens (as
// PyTorch's cross_entropy with ignore_index), so a batch's tokens weigh equally whatever
// example they belong to. A mask value other than 0 or 1 makes the machine fail with an error
// naming the element.
//
// Reference: the maximum-likelihood objective of autoregressive LMs (Radford et al. 2018);
// loss on answer tokens only as in instruction tuning (Ouyang et al. 2022).
//
// Prefer it for a reader's language-model pretraining and answer-only fine-tuning; when the
// answer's likelihood is marginalised over retrieved passages use RAGSequence or RAGToken.
func TokenNLL(logp, mask *G.Node) (*G.Node, error) {
	const loss = "TokenNLL"
	if _, err := floatDtype(loss, []string{"logp", "mask"}, logp, mask); err != nil {
		return nil, err
	}
	if ls, ms := logp.Shape(), mask.Shape(); len(ls) != len(ms) || !ls.Eq(ms) {
		return nil, errors.Errorf("losses: %s: mask has shape %v, logp %v", loss, mask.Shape(), logp.Shape())
	}
	terms, err := newTokenNLLOp(logp.Dims()).apply(logp, mask)
	if err != nil {
		return nil, err
	}
	out, err := G.Sum(terms)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: sum", loss)
	}
	return out, nil
}

// newTokenNLLOp returns the op (logp, mask) -> -mask_i logp_i / sum(mask), elementwise, whose
// gradient on logp is -mask_i g_i / sum(mask).
func newTokenNLLOp(dims int) *fop {
	return &fop{
		name:    "tokenNLLTerms",
		inDims:  []int{dims, dims},
		outDims: dims,
		fwd: func(in []arr) ([]float64, error) {
			return tokenNLLScaled(in[0].data, in[1].data, -1)
		},
		diff: []bool{true, false},
		grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
			// The terms are linear in x: their gradient is the same map applied to g.
			dx, err := newTokenNLLOp(dims).apply(g, in[1])
			return G.Nodes{dx, nil}, err
		},
	}
}

// tokenNLLScaled returns sign * mask_i x_i / sum(mask), with 0 where mask_i = 0.
func tokenNLLScaled(x, mask []float64, sign float64) ([]float64, error) {
	var n float64
	for i, m := range mask {
		switch m {
		case 0:
		case 1:
			n++
		default:
			return nil, errors.Errorf("losses: TokenNLL: mask[%d] = %g, want 0 (ignored) or 1 (target token)", i, m)
		}
	}
	out := make([]float64, len(x))
	if n == 0 {
		return out, nil
	}
	for i, m := range mask {
		if m == 1 {
			out[i] = sign * x[i] / n
		}
	}
	return out, nil
}
