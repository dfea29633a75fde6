package losses

import (
	"fmt"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// FlopsWeights are the FLOPS regulariser's weights lambda_q and lambda_d of one step: the caller
// sets them before every run (SPLADE's quadratic warm-up, FlopsWarmup), the graph reads them.
type FlopsWeights struct{ Query, Passage float64 }

// FlopsWarmup is SPLADE's schedule of a regulariser weight: lambda·min(1, (step/warmup)²),
// step counted from 0 (Formal et al. 2021, "SPLADE v2", section 3: lambda increased
// quadratically over the first warmup steps, as sentence-transformers'
// SpladeRegularizerWeightSchedulerCallback with its default quadratic schedule). warmup <= 0
// gives lambda at every step.
func FlopsWarmup(lambda float64, step, warmup int) float64 {
	if warmup <= 0 || step >= warmup {
		return lambda
	}
	r := float64(step) / float64(warmup)
	return lambda * r * r
}

// FLOPS is the FLOPS regulariser of sparse representations: the sum over the vocabulary of the
// squared mean activation of each term over the batch, a smooth surrogate of the number of
// floating-point operations of an inverted-index search (the expected number of posting-list
// entries two random rows share):
//
//	FLOPS(x) = weight · Σ_v ( (1/R) Σ_r x[r,v] )²
//
// x is [R,V] of non-negative term weights (SPLADE's log(1+ReLU)); the result is a scalar of x's
// dtype; *weight is read at every run (so a schedule can change it between steps).
//
// Reference: Paria et al. 2020, "Minimizing FLOPs to Learn Efficient Sparse Representations"
// (ICLR), eq. 4; used by SPLADE (Formal et al. 2021) on queries and passages separately;
// sentence-transformers' FlopsLoss (torch.sum(torch.mean(x, dim=0) ** 2)).
//
// Prefer it over an L1 penalty for inverted-index retrieval: it penalises terms that are active
// in many rows (long posting lists) more than rare ones, which L1 does not.
func FLOPS(x *G.Node, weight *float64) (*G.Node, error) {
	if weight == nil {
		return nil, errors.New("losses: FLOPS: nil weight")
	}
	if _, err := floatDtype("FLOPS", []string{"x"}, x); err != nil {
		return nil, err
	}
	if err := wantShape("FLOPS", "x", x, -1, -1); err != nil {
		return nil, err
	}
	per, err := flopsOp(weight).apply(x) // [V]: weight·mean_v²
	if err != nil {
		return nil, err
	}
	return G.Sum(per)
}

func flopsOp(w *float64) *fop {
	return &fop{
		name:    fmt.Sprintf("FLOPS@%p", w), // ops of different weights are never merged
		inDims:  []int{2},
		outDims: 1,
		shape:   func(in []tensor.Shape) (tensor.Shape, error) { return tensor.Shape{in[0][1]}, nil },
		fwd: func(in []arr) ([]float64, error) {
			m := colMeans(in[0])
			for j, v := range m {
				m[j] = *w * v * v
			}
			return m, nil
		},
		diff: []bool{true},
		grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
			d, err := flopsGradOp(w).apply(in[0], g)
			return G.Nodes{d}, err
		},
	}
}

// flopsGradOp: (x [R,V], g [V]) -> [R,V], every row g_v·weight·2·mean_v / R.
func flopsGradOp(w *float64) *fop {
	return &fop{
		name:    fmt.Sprintf("FLOPSGrad@%p", w),
		inDims:  []int{2, 1},
		outDims: 2,
		shape:   func(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil },
		fwd: func(in []arr) ([]float64, error) {
			m := colMeans(in[0])
			r, v := in[0].shape[0], in[0].shape[1]
			c := *w * 2 / float64(r)
			out := make([]float64, r*v)
			for i := 0; i < r; i++ {
				for j, mj := range m {
					out[i*v+j] = c * in[1].data[j] * mj
				}
			}
			return out, nil
		},
	}
}

func colMeans(x arr) []float64 {
	r, v := x.shape[0], x.shape[1]
	m := make([]float64, v)
	for i := 0; i < r; i++ {
		for j, e := range x.data[i*v : (i+1)*v] {
			m[j] += e
		}
	}
	for j := range m {
		m[j] /= float64(r)
	}
	return m
}

// SpladeLoss is SPLADE's training objective: InfoNCE on the sparse vectors' dot product plus
// the FLOPS regulariser of the queries and of the passages, each with its own weight.
//
//	L = InfoNCE(q, p; dot, tau) + lambda_q·FLOPS(q) + lambda_d·FLOPS(p)
//
// Inputs: q [B,V] and p [N,V] (N >= B; rows 0..B-1 of p the positives, the rest hard negatives,
// as InfoNCE) of non-negative term weights; mask [B,N] additive or nil (InfoNCEMasked); tau > 0
// (1 in SPLADE: the dot products of sparse vectors are unnormalised); w the regulariser weights
// read at every run. The result is a scalar of q's dtype.
//
// Reference: Formal et al. 2021, "SPLADE v2" (arXiv:2109.10086), eq. 3-5 (ranking loss with
// in-batch and hard negatives, FLOPS on queries and documents); sentence-transformers 6's
// SpladeLoss (SparseMultipleNegativesRankingLoss + FlopsLoss on queries and on all documents).
//
// Prefer it for learned sparse retrieval; a dense bi-encoder trains InfoNCE alone.
func SpladeLoss(q, p, mask *G.Node, tau float64, w *FlopsWeights) (*G.Node, error) {
	if w == nil {
		return nil, errors.New("losses: splade: nil FLOPS weights (Inputs.Flops)")
	}
	nce, err := infoNCE("SpladeLoss", q, p, mask, tau, Dot)
	if err != nil {
		return nil, err
	}
	return addFlops(nce, q, p, w)
}

// splade: Contrastive inputs Q, P, Mask, Temperature (Similarity must be Dot) and Flops.
func init() {
	Register(Spec{Name: "splade", Batch: Contrastive, Build: func(in Inputs) (*G.Node, error) {
		if in.Similarity != Dot {
			return nil, errors.Errorf("losses: splade scores sparse vectors by their dot product, got similarity %v", in.Similarity)
		}
		return SpladeLoss(in.Q, in.P, in.Mask, in.Temperature, in.Flops)
	}})
}
