package losses

import (
	"fmt"
	"math"
	"strings"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Similarity is the score s(q, p) between a query and a passage embedding.
type Similarity int

const (
	// Dot is the inner product q·p (DPR).
	Dot Similarity = iota
	// Cosine is q·p / (|q| |p|), computed as the inner product of rows divided by
	// sqrt(|x|² + NormEps) (SimCSE, E5 and sentence-transformers use it with tau ~ 0.05).
	Cosine
)

// NormEps is added to the squared L2 norm before the square root when rows are normalised for
// Cosine similarity, so that an all-zero embedding gives a zero row instead of NaN.
const NormEps = 1e-12

// ParseSimilarity reads "dot" or "cosine" (as written in a recipe).
func ParseSimilarity(s string) (Similarity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "dot":
		return Dot, nil
	case "cosine", "cos":
		return Cosine, nil
	}
	return 0, fmt.Errorf("losses: unknown similarity %q (want \"dot\" or \"cosine\")", s)
}

func (s Similarity) String() string {
	switch s {
	case Dot:
		return "dot"
	case Cosine:
		return "cosine"
	}
	return fmt.Sprintf("Similarity(%d)", int(s))
}

// InfoNCE is the contrastive loss of dense retrievers: it raises each query's score for its own
// positive passage relative to every other passage in the batch.
//
//	L = mean_i -log( exp(s(q_i, p_i)/tau) / sum_j exp(s(q_i, p_j)/tau) )
//
// Inputs: q [B,H] query embeddings; p [N,H] passage embeddings with N >= B, where rows 0..B-1
// are the positives of queries 0..B-1 and rows B..N-1 are the hard negatives of all queries,
// flattened. Every row of p is a candidate for every query: the other queries' positives are
// in-batch negatives, and a query is also contrasted with the other queries' hard negatives.
// tau > 0 is the temperature; sim is Dot or Cosine (rows normalised with NormEps first).
// q and p are float32 or float64, the result is a scalar node of the same dtype. The log-sum-exp
// over candidates is max-subtracted, so large scores/tau do not overflow.
//
// Reference: van den Oord et al. 2018, "Representation Learning with Contrastive Predictive
// Coding" (InfoNCE); Karpukhin et al. 2020, "Dense Passage Retrieval" (in-batch negatives plus
// BM25 hard negatives).
//
// Prefer it for training bi-encoders from (query, positive, negatives) triples: every passage in
// the batch is used as a negative at the cost of one [B,N] score matrix. Use InfoNCEMasked when
// some candidates may be unlabelled positives of a query (false negatives), Pairwise when only
// single (positive, negative) score pairs are available, Listwise for graded labels over a fixed
// candidate list.
func InfoNCE(q, p *G.Node, tau float64, sim Similarity) (*G.Node, error) {
	return infoNCE("InfoNCE", q, p, nil, tau, sim)
}

// InfoNCEMasked is InfoNCE with some candidates excluded per query, so that a passage that is
// in fact relevant to a query (a false negative) is not pushed away from it.
//
//	L = mean_i -log( exp(s_ii/tau) / sum_j exp(s_ij/tau + m_ij) ),  s_ij = s(q_i, p_j)
//
// Inputs: q [B,H] and p [N,H] as for InfoNCE; mask [B,N] additive, 0 to keep a candidate and a
// large negative number (or -Inf) to remove it: a candidate with m_ij = -Inf contributes exactly
// nothing, as if it were absent from p for query i. Every mask value must be <= 0, and
// m_ii (the query's own positive) must be 0; otherwise the machine running the graph fails
// with an error naming the element. The mask receives no gradient.
//
// Reference: as InfoNCE; masking false negatives as in RocketQA (Qu et al. 2021) and
// Contriever-style in-batch training.
//
// Prefer it over InfoNCE when the sampler cannot guarantee that in-batch passages are
// irrelevant to every other query (duplicates, multi-relevant queries).
func InfoNCEMasked(q, p, mask *G.Node, tau float64, sim Similarity) (*G.Node, error) {
	if mask == nil {
		return nil, errors.New("losses: InfoNCEMasked: mask is nil")
	}
	return infoNCE("InfoNCEMasked", q, p, mask, tau, sim)
}

func infoNCE(loss string, q, p, mask *G.Node, tau float64, sim Similarity) (*G.Node, error) {
	names := []string{"q", "p"}
	nodes := []*G.Node{q, p}
	if mask != nil {
		names, nodes = append(names, "mask"), append(nodes, mask)
	}
	dt, err := floatDtype(loss, names, nodes...)
	if err != nil {
		return nil, err
	}
	if err := wantQueryRows(loss, q, "p", p, tau); err != nil {
		return nil, err
	}
	b, n := q.Shape()[0], p.Shape()[0]
	if n < b {
		return nil, errors.Errorf("losses: %s: p has %d rows, fewer than the %d queries in q (rows 0..B-1 of p must be the positives)", loss, n, b)
	}
	if mask != nil {
		if err := wantShape(loss, "mask", mask, b, n); err != nil {
			return nil, err
		}
	}

	scores, err := simScores(loss, sim, q, p) // [B,N]
	if err != nil {
		return nil, err
	}
	return diagCrossEntropy(loss, dt, scores, mask, tau)
}

// diagCrossEntropy is mean_i -log softmax(scores_i/tau + mask_i)_i of a [B,N] score matrix whose
// column i < B is query i's positive (mask nil: no mask).
func diagCrossEntropy(loss string, dt tensor.Dtype, scores, mask *G.Node, tau float64) (*G.Node, error) {
	b, n := scores.Shape()[0], scores.Shape()[1]
	scores, err := G.HadamardProd(scores, scalar(dt, 1/tau))
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: scale by 1/tau", loss)
	}

	// The positive's score s_ii/tau, picked from the unmasked scores.
	diag := make([]float64, b*n)
	for i := 0; i < b; i++ {
		diag[i*n+i] = 1
	}
	sel := G.NewConstant(fromFloat64(diag, tensor.Shape{b, n}, dt), G.WithName(loss+".positives"))
	picked, err := G.HadamardProd(scores, sel)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: pick positives", loss)
	}
	pos, err := G.Sum(picked, 1) // [B]
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: pick positives", loss)
	}

	logits := scores
	if mask != nil {
		if logits, err = addMask(scores, mask); err != nil {
			return nil, err
		}
	}
	lse, err := logSumExpRows(logits) // [B]
	if err != nil {
		return nil, err
	}
	return meanDiff(loss, lse, pos)
}

// meanDiff is the mean over the elements of a - b, nodes of one shape: for [B] nodes
// mean_b(a_b - b_b), a mean negative log-likelihood when a is the log normaliser and b the
// target's log score.
func meanDiff(loss string, a, b *G.Node) (*G.Node, error) {
	d, err := G.Sub(a, b)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	return mean(loss, d)
}

// mean returns the mean of x's elements; loss names the loss in the error.
func mean(loss string, x *G.Node) (*G.Node, error) {
	out, err := G.Mean(x)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: mean", loss)
	}
	return out, nil
}

// applySimilarity prepares embedding nodes for the inner products of sim: unchanged for Dot,
// each row L2-normalised (l2NormalizeRows) for Cosine, normalised in the order given. An
// unknown similarity is an error naming the loss.
func applySimilarity(loss string, sim Similarity, xs ...**G.Node) error {
	switch sim {
	case Dot:
		return nil
	case Cosine:
		for _, x := range xs {
			y, err := l2NormalizeRows(*x)
			if err != nil {
				return err
			}
			*x = y
		}
		return nil
	}
	return errors.Errorf("losses: %s: unknown similarity %v", loss, sim)
}

// simScores returns the [B,N] matrix sim(q_b, p_n) of q [B,H] and p [N,H]: q p^T after
// applySimilarity.
func simScores(loss string, sim Similarity, q, p *G.Node) (*G.Node, error) {
	if err := applySimilarity(loss, sim, &q, &p); err != nil {
		return nil, err
	}
	pt, err := G.Transpose(p)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: p^T", loss)
	}
	s, err := G.Mul(q, pt)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: q p^T", loss)
	}
	return s, nil
}

// l2NormalizeRows returns x_r / sqrt(|x_r|² + NormEps) for every row of a [R,H] node.
// Gradient: dx_r = (g_r - y_r (y_r·g_r)) / sqrt(|x_r|² + NormEps), y the output.
func l2NormalizeRows(x *G.Node) (*G.Node, error) {
	return l2NormOp.apply(x)
}

var l2NormOp = &fop{
	name:    fmt.Sprintf("l2NormalizeRows(eps=%g)", NormEps),
	inDims:  []int{2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		return byRow(in, func(out []float64, x [][]float64) {
			n := rowNorm(x[0])
			for j, v := range x[0] {
				out[j] = v / n
			}
		}), nil
	},
	diff: []bool{true},
	grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
		dx, err := l2NormGradOp.apply(in[0], g)
		return G.Nodes{dx}, err
	},
}

func rowNorm(row []float64) float64 {
	s := NormEps
	for _, v := range row {
		s += v * v
	}
	return math.Sqrt(s)
}

var l2NormGradOp = &fop{
	name:    "l2NormalizeRowsGrad",
	inDims:  []int{2, 2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		return byRow(in, func(out []float64, xg [][]float64) {
			x, g := xg[0], xg[1]
			n := rowNorm(x)
			yg := 0.0
			for j, v := range x {
				yg += v / n * g[j]
			}
			for j, v := range x {
				out[j] = (g[j] - v/n*yg) / n
			}
		}), nil
	},
}

// addMask returns scores + mask for [B,N] nodes after checking the mask: values <= 0 (or -Inf),
// no NaN, and 0 on the positives (i, i) for i < B. Only scores receive a gradient.
func addMask(scores, mask *G.Node) (*G.Node, error) {
	return addMaskOp.apply(scores, mask)
}

var addMaskOp = &fop{
	name:    "infoNCEAddMask",
	inDims:  []int{2, 2},
	outDims: 2,
	fwd: func(in []arr) ([]float64, error) {
		s, m := in[0], in[1].data
		b, n := s.shape[0], s.shape[1]
		out := make([]float64, len(m))
		for i := 0; i < b; i++ {
			for j := 0; j < n; j++ {
				v := m[i*n+j]
				switch {
				case math.IsNaN(v) || v > 0:
					return nil, errors.Errorf("losses: InfoNCEMasked: mask[%d][%d] = %g, want 0 or a negative number", i, j, v)
				case i == j && v != 0:
					return nil, errors.Errorf("losses: InfoNCEMasked: mask[%d][%d] = %g masks the positive of query %d, want 0", i, j, v, i)
				}
				out[i*n+j] = s.data[i*n+j] + v
			}
		}
		return out, nil
	},
	diff: []bool{true, false},
	grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
		return G.Nodes{g, nil}, nil
	},
}

// infonce trains bi-encoders on contrastive batches (in-batch and hard negatives; a Mask removes
// judged-relevant candidates of other queries).
func init() {
	Register(Spec{Name: "infonce", Batch: Contrastive, Build: func(in Inputs) (*G.Node, error) {
		if in.Mask != nil {
			return InfoNCEMasked(in.Q, in.P, in.Mask, in.Temperature, in.Similarity)
		}
		return InfoNCE(in.Q, in.P, in.Temperature, in.Similarity)
	}})
}
