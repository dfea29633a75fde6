package losses

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The RAG losses share their inputs:
//
//	s    [B,K]   retrieval logits of the K retrieved passages z_1..z_K of each example
//	             (the retriever's scores; p(z_k|x) = softmax(s_b)_k over the K candidates)
//	logp [B,K,T] log p_theta(y_t | x, z_k, y_<t): the generator's log-probability of target
//	             token t given passage k (teacher forcing), T the padded target length
//	mask [B,T]   1 for a real target token, 0 for padding; padded positions of logp are
//	             ignored (they may hold any value, -Inf included) and receive zero gradient
//
// Both s and logp receive gradients (the retriever and the generator are trained jointly);
// mask receives none. Every loss is a mean over the batch of per-example negative
// log-likelihoods summed over real tokens (not divided by the number of tokens). A mask value
// other than 0 or 1 makes the machine fail with an error naming the element.

// RAGSequence is the RAG-Sequence marginal likelihood: the whole target is generated from
// one retrieved passage, and the loss marginalises over which one.
//
//	L = mean_b -log sum_k p(z_k|x_b) prod_t p_theta(y_t | x_b, z_k, y_<t)
//	  = mean_b -logsumexp_k( log softmax(s_b)_k + sum_t mask_bt logp_bkt )
//
// computed in log space (max-subtracted log-sum-exp), so long targets whose sequence
// probabilities underflow are still exact. Inputs: s [B,K], logp [B,K,T], mask [B,T] as
// described above. The gradient on s_b is (p_b - gamma_b)/B, with gamma the posterior
// returned by RAGPosterior.
//
// Reference: Lewis et al. 2020, "Retrieval-Augmented Generation for Knowledge-Intensive NLP
// Tasks", eq. for p_RAG-Sequence.
//
// Prefer it when one passage should support the whole answer (short factoid answers,
// extractive targets); RAGToken lets different tokens draw on different passages.
func RAGSequence(s, logp, mask *G.Node) (*G.Node, error) {
	joint, err := ragLogJoint("RAGSequence", s, logp, mask)
	if err != nil {
		return nil, err
	}
	lse, err := logSumExpRows(joint) // [B]: log p(y|x)
	if err != nil {
		return nil, err
	}
	return negMean("RAGSequence", lse)
}

// RAGSequenceFull is RAGSequence with the retrieval distribution normalised over the whole
// corpus instead of over the K retrieved passages ("full" candidate mass): passages outside
// the top K count as generating the target with probability 0.
//
//	L = mean_b -log sum_k exp(s_bk - logZ_b) prod_t p_theta(y_t | x_b, z_k, y_<t)
//	  = mean_b ( logZ_b - logsumexp_k( s_bk + sum_t mask_bt logp_bkt ) )
//
// Inputs: s, logp, mask as for RAGSequence; logZ [B] = log sum over every corpus passage d of
// exp(score(x_b, d)), computed by the caller (for example from an exact inner-product search
// over the whole index). logZ is a constant: it receives no gradient and passes none to
// whatever computed it, so the gradient on s_b is -gamma_b/B (gamma from RAGPosterior); the
// pull-down on the passages outside the top K, which a full softmax would add, is omitted.
// logZ_b must be at least logsumexp_k s_bk (the K candidates are part of the corpus); a
// smaller value makes the machine fail with an error naming the example.
//
// Reference: Lewis et al. 2020 (RAG); the corpus-normalised retrieval probability follows
// REALM, Guu et al. 2020, which marginalises over the top K of the full-corpus softmax.
//
// Prefer it over RAGSequence when the retriever's scores should stay calibrated against the
// whole corpus, so that a batch in which no retrieved passage explains the target still
// lowers the loss only by raising the candidates' scores; RAGSequence renormalises over K
// and cannot express that all K candidates are poor.
func RAGSequenceFull(s, logZ, logp, mask *G.Node) (*G.Node, error) {
	const loss = "RAGSequenceFull"
	shape, err := ragInputs(loss, s, logp, mask)
	if err != nil {
		return nil, err
	}
	if _, err := floatDtype(loss, []string{"s", "logZ"}, s, logZ); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "logZ", logZ, shape[0]); err != nil {
		return nil, err
	}
	z, err := fullLogZOp.apply(logZ, s)
	if err != nil {
		return nil, err
	}
	joint, err := ragJoint(loss, s, logp, mask)
	if err != nil {
		return nil, err
	}
	lse, err := logSumExpRows(joint)
	if err != nil {
		return nil, err
	}
	return meanDiff(loss, z, lse)
}

// RAGToken is the RAG-Token marginal likelihood: each target token may be generated from a
// different retrieved passage, and the loss marginalises over passages token by token.
//
//	L = mean_b -sum_t mask_bt log sum_k p(z_k|x_b) p_theta(y_t | x_b, z_k, y_<t)
//	  = mean_b -sum_t mask_bt logsumexp_k( log softmax(s_b)_k + logp_bkt )
//
// Inputs: s [B,K], logp [B,K,T], mask [B,T] as for RAGSequence.
//
// Reference: Lewis et al. 2020, "Retrieval-Augmented Generation for Knowledge-Intensive NLP
// Tasks", eq. for p_RAG-Token.
//
// Prefer it for long or abstractive targets that combine facts from several passages; for
// targets supported by one passage RAGSequence is the better-matched model.
func RAGToken(s, logp, mask *G.Node) (*G.Node, error) {
	const loss = "RAGToken"
	if _, err := ragInputs(loss, s, logp, mask); err != nil {
		return nil, err
	}
	logw, err := logSoftmaxRows(s)
	if err != nil {
		return nil, err
	}
	masked, err := maskTokens(logp, mask)
	if err != nil {
		return nil, err
	}
	mix, err := mixLSEOp.apply(logw, masked) // [B,T]: log p(y_t | x, y_<t)
	if err != nil {
		return nil, err
	}
	kept, err := G.HadamardProd(mix, mask)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: mask", loss)
	}
	perExample, err := G.Sum(kept, 1) // [B]: log p(y|x)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	return negMean(loss, perExample)
}

// RAGPosterior returns the [B,K] posterior over retrieved passages given the target, the
// weights of the RAG-Sequence gradient:
//
//	gamma_bk = p_bk a_bk / sum_j p_bj a_bj,  p_b = softmax(s_b),  a_bk = prod_t p_theta(y_t | x_b, z_k, y_<t)
//
// computed as softmax_k(log softmax(s_b)_k + sum_t mask_bt logp_bkt). Inputs as for
// RAGSequence. The node is a constant (no gradient flows through it): use it to inspect which
// passage explains the target, or as a fixed target distribution for the retriever (EMDR-style
// training).
//
// Reference: Lewis et al. 2020 (RAG); the posterior of the latent passage as in Guu et al.
// 2020 (REALM) and Sachan et al. 2021 (EMDR²).
func RAGPosterior(s, logp, mask *G.Node) (*G.Node, error) {
	joint, err := ragLogJoint("RAGPosterior", s, logp, mask)
	if err != nil {
		return nil, err
	}
	return constSoftmaxRows(joint, 1)
}

// ragInputs checks dtypes and shapes and returns (B, K, T).
// ragLogJoint checks the inputs (ragInputs) and returns log softmax(s)_k + the masked sum of
// logp over the target tokens: [B,K], the log joint of passage k and the target.
func ragLogJoint(loss string, s, logp, mask *G.Node) (*G.Node, error) {
	if _, err := ragInputs(loss, s, logp, mask); err != nil {
		return nil, err
	}
	logw, err := logSoftmaxRows(s)
	if err != nil {
		return nil, err
	}
	return ragJoint(loss, logw, logp, mask)
}

func ragInputs(loss string, s, logp, mask *G.Node) ([]int, error) {
	if _, err := floatDtype(loss, []string{"s", "logp", "mask"}, s, logp, mask); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "s", s, -1, -1); err != nil {
		return nil, err
	}
	b, k := s.Shape()[0], s.Shape()[1]
	if err := wantShape(loss, "logp", logp, b, k, -1); err != nil {
		return nil, err
	}
	t := logp.Shape()[2]
	if err := wantShape(loss, "mask", mask, b, t); err != nil {
		return nil, err
	}
	return []int{b, k, t}, nil
}

// ragJoint returns the [B,K] node logw_bk + sum_t mask_bt logp_bkt.
func ragJoint(loss string, logw, logp, mask *G.Node) (*G.Node, error) {
	masked, err := maskTokens(logp, mask)
	if err != nil {
		return nil, err
	}
	seq, err := G.Sum(masked, 2) // [B,K]: log prod_t p_theta(y_t|x,z_k,y_<t)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: sum over tokens", loss)
	}
	joint, err := G.Add(logw, seq)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	return joint, nil
}

// negMean returns -mean(x).
func negMean(loss string, x *G.Node) (*G.Node, error) {
	m, err := mean(loss, x)
	if err != nil {
		return nil, err
	}
	out, err := G.Neg(m)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	return out, nil
}

// maskTokens returns logp [B,K,T] with the padded positions (mask [B,T] = 0) set to 0, a
// select rather than a product, so that -Inf or NaN at padding cannot leak. Its gradient on
// logp is the same op applied to the incoming gradient.
func maskTokens(logp, mask *G.Node) (*G.Node, error) { return newMaskTokensOp().apply(logp, mask) }

func newMaskTokensOp() *fop {
	return &fop{
		name:    "ragMaskTokens",
		inDims:  []int{3, 2},
		outDims: 3,
		shape: func(in []tensor.Shape) (tensor.Shape, error) {
			if !in[1].Eq(tensor.Shape{in[0][0], in[0][2]}) {
				return nil, errors.Errorf("ragMaskTokens: mask has shape %v, want (%d, %d)", in[1], in[0][0], in[0][2])
			}
			return in[0].Clone(), nil
		},
		fwd: func(in []arr) ([]float64, error) {
			x, m := in[0], in[1].data
			b, k, t := x.shape[0], x.shape[1], x.shape[2]
			out := make([]float64, len(x.data))
			for i := 0; i < b; i++ {
				for j := 0; j < t; j++ {
					switch v := m[i*t+j]; v {
					case 0:
						continue
					case 1:
						for c := 0; c < k; c++ {
							at := (i*k+c)*t + j
							out[at] = x.data[at]
						}
					default:
						return nil, errors.Errorf("losses: RAG: mask[%d][%d] = %g, want 0 (padding) or 1 (target token)", i, j, v)
					}
				}
			}
			return out, nil
		},
		diff: []bool{true, false},
		grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
			dx, err := maskTokens(g, in[1])
			return G.Nodes{dx, nil}, err
		},
	}
}

// mixLSEOp returns the [B,T] node log sum_k exp(logw_bk + x_bkt) of logw [B,K] and x [B,K,T]:
// the log of the mixture over passages, per token.
var mixLSEOp = &fop{
	name:    "ragMixtureLogSumExp",
	inDims:  []int{2, 3},
	outDims: 2,
	shape: func(in []tensor.Shape) (tensor.Shape, error) {
		if in[1][0] != in[0][0] || in[1][1] != in[0][1] {
			return nil, errors.Errorf("ragMixtureLogSumExp: x has shape %v, logw %v", in[1], in[0])
		}
		return tensor.Shape{in[1][0], in[1][2]}, nil
	},
	fwd: func(in []arr) ([]float64, error) {
		w, x := in[0].data, in[1]
		b, k, t := x.shape[0], x.shape[1], x.shape[2]
		out := make([]float64, b*t)
		col := make([]float64, k)
		for i := 0; i < b; i++ {
			for j := 0; j < t; j++ {
				for c := 0; c < k; c++ {
					col[c] = w[i*k+c] + x.data[(i*k+c)*t+j]
				}
				out[i*t+j] = lseRow(col)
			}
		}
		return out, nil
	},
	diff: []bool{true, true},
	grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
		post, err := mixPostOp.apply(in[0], in[1], out, g) // [B,K,T]
		if err != nil {
			return nil, err
		}
		// The sum over t is taken in float64 inside the op: a float32 graph summing
		// thousands of token terms would lose digits to rounding.
		dw, err := mixPostSumOp.apply(in[0], in[1], out, g) // [B,K]
		if err != nil {
			return nil, err
		}
		return G.Nodes{dw, post}, nil
	},
}

// mixPostOp computes g_bt exp(logw_bk + x_bkt - out_bt), the gradient of mixLSEOp on x, from
// (logw [B,K], x [B,K,T], out [B,T], g [B,T]).
var mixPostOp = &fop{
	name:    "ragMixtureLogSumExpGradX",
	inDims:  []int{2, 3, 2, 2},
	outDims: 3,
	shape: func(in []tensor.Shape) (tensor.Shape, error) {
		if err := mixGradShapes(in); err != nil {
			return nil, err
		}
		return in[1].Clone(), nil
	},
	fwd: func(in []arr) ([]float64, error) { return mixPost(in), nil },
}

// mixPostSumOp is the gradient of mixLSEOp on logw: mixPostOp summed over t, in float64.
var mixPostSumOp = &fop{
	name:    "ragMixtureLogSumExpGradW",
	inDims:  []int{2, 3, 2, 2},
	outDims: 2,
	shape: func(in []tensor.Shape) (tensor.Shape, error) {
		if err := mixGradShapes(in); err != nil {
			return nil, err
		}
		return in[0].Clone(), nil
	},
	fwd: func(in []arr) ([]float64, error) {
		post, t := mixPost(in), in[1].shape[2]
		out := make([]float64, len(post)/t)
		for i := range out {
			for _, v := range post[i*t : (i+1)*t] {
				out[i] += v
			}
		}
		return out, nil
	},
}

func mixGradShapes(in []tensor.Shape) error {
	bt := tensor.Shape{in[1][0], in[1][2]}
	if in[0][0] != in[1][0] || in[0][1] != in[1][1] || !in[2].Eq(bt) || !in[3].Eq(bt) {
		return errors.Errorf("ragMixtureLogSumExp gradient: input shapes %v", in)
	}
	return nil
}

// mixPost returns the [B,K,T] array g_bt exp(logw_bk + x_bkt - out_bt).
func mixPost(in []arr) []float64 {
	w, x, lse, g := in[0].data, in[1], in[2].data, in[3].data
	b, k, t := x.shape[0], x.shape[1], x.shape[2]
	out := make([]float64, len(x.data))
	for i := 0; i < b; i++ {
		for j := 0; j < t; j++ {
			if math.IsInf(lse[i*t+j], -1) {
				continue
			}
			for c := 0; c < k; c++ {
				at := (i*k+c)*t + j
				out[at] = g[i*t+j] * math.Exp(w[i*k+c]+x.data[at]-lse[i*t+j])
			}
		}
	}
	return out
}

// fullLogZOp passes logZ [B] through as a constant after checking it against the candidates'
// own log-sum-exp of s [B,K].
var fullLogZOp = &fop{
	name:    "ragFullLogZ",
	inDims:  []int{1, 2},
	outDims: 1,
	shape: func(in []tensor.Shape) (tensor.Shape, error) {
		if !in[0].Eq(tensor.Shape{in[1][0]}) {
			return nil, errors.Errorf("ragFullLogZ: logZ has shape %v, s %v", in[0], in[1])
		}
		return in[0].Clone(), nil
	},
	fwd: func(in []arr) ([]float64, error) {
		z, s := in[0].data, in[1]
		k := rowLen(s)
		for i, v := range z {
			own := lseRow(s.data[i*k : (i+1)*k])
			if math.IsNaN(v) || v < own-1e-5*math.Max(1, math.Abs(own)) {
				return nil, errors.Errorf("losses: RAGSequenceFull: logZ[%d] = %g is below %g, the log-sum-exp of the example's own %d candidate scores; logZ must cover the whole corpus, candidates included", i, v, own, k)
			}
		}
		return z, nil
	},
}
