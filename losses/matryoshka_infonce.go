package losses

import (
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// MatryoshkaInfoNCE trains embeddings whose prefixes are embeddings too: it sums the InfoNCE
// loss of the first m coordinates over a set of prefix sizes m, so that an index can keep only
// the first m dimensions of every vector.
//
//	L = sum_m w_m InfoNCE(q[:, :m], p[:, :m])
//	  = sum_m w_m mean_i -log( exp(s_m(q_i, p_i)/tau) / sum_j exp(s_m(q_i, p_j)/tau) )
//
// s_m is the similarity of the prefixes: for Cosine each prefix is normalised again (with
// NormEps), s_m(q, p) = q[:m]·p[:m] / (|q[:m]| |p[:m]|), not a prefix of the full vector's
// normalisation; for Dot it is q[:m]·p[:m].
//
// Inputs: q [B,H] and p [N,H], N >= B, as for InfoNCE (rows 0..B-1 of p the positives, the
// rest hard negatives, every row a candidate of every query); dims the prefix sizes, distinct,
// each in 1..H (H itself for the full vector), in any order; weights w_m >= 0, one per dim
// and not all 0 (nil: all 1); tau > 0 and sim as for InfoNCE. The result is a scalar node of
// the inputs' dtype (float32 or float64), in nats: a weighted sum, not a mean, so with weights 1
// it is about len(dims) times an InfoNCE loss.
//
// Reference: Kusupati et al. 2022, "Matryoshka Representation Learning" (NeurIPS 2022,
// arXiv:2205.13147), the MRL objective with importance weights c_m, there over classifiers of
// each prefix and here over the contrastive loss (sentence-transformers' MatryoshkaLoss around
// MultipleNegativesRankingLoss).
//
// Prefer it to InfoNCE when the index will store truncated vectors (memory, faster search, a
// small first-stage prefix with full-vector rescoring); train with the dims the index will use,
// typically halvings of H.
func MatryoshkaInfoNCE(q, p *G.Node, dims []int, weights []float64, tau float64, sim Similarity) (*G.Node, error) {
	return matryoshkaInfoNCE(q, p, nil, dims, weights, tau, sim)
}

// matryoshkaInfoNCE is MatryoshkaInfoNCE with an optional InfoNCEMasked mask [B,N], the same
// for every prefix.
func matryoshkaInfoNCE(q, p, mask *G.Node, dims []int, weights []float64, tau float64, sim Similarity) (*G.Node, error) {
	const loss = "MatryoshkaInfoNCE"
	dt, err := floatDtype(loss, []string{"q", "p"}, q, p)
	if err != nil {
		return nil, err
	}
	if err := wantShape(loss, "q", q, -1, -1); err != nil {
		return nil, err
	}
	h := q.Shape()[1]
	if len(dims) == 0 {
		return nil, errors.Errorf("losses: %s: no prefix dims", loss)
	}
	if weights == nil {
		weights = make([]float64, len(dims))
		for i := range weights {
			weights[i] = 1
		}
	}
	if len(weights) != len(dims) {
		return nil, errors.Errorf("losses: %s: %d weights for %d dims", loss, len(weights), len(dims))
	}
	seen, total := map[int]bool{}, 0.0
	for i, m := range dims {
		if m < 1 || m > h {
			return nil, errors.Errorf("losses: %s: dims[%d] = %d, want 1..%d (the embedding size)", loss, i, m, h)
		}
		if seen[m] {
			return nil, errors.Errorf("losses: %s: dims[%d] = %d repeats an earlier prefix", loss, i, m)
		}
		seen[m] = true
		if w := weights[i]; !(w >= 0) || math.IsInf(w, 0) {
			return nil, errors.Errorf("losses: %s: weights[%d] = %g, want a finite number >= 0", loss, i, w)
		}
		total += weights[i]
	}
	if total == 0 {
		return nil, errors.Errorf("losses: %s: every weight is 0", loss)
	}

	var sum *G.Node
	for i, m := range dims {
		if weights[i] == 0 {
			continue
		}
		qm, pm := q, p
		if m < h {
			if qm, err = G.Slice(q, nil, G.S(0, m)); err != nil {
				return nil, errors.Wrapf(err, "losses: %s: q[:, :%d]", loss, m)
			}
			if pm, err = G.Slice(p, nil, G.S(0, m)); err != nil {
				return nil, errors.Wrapf(err, "losses: %s: p[:, :%d]", loss, m)
			}
		}
		l, err := infoNCE(loss, qm, pm, mask, tau, sim)
		if err != nil {
			return nil, err
		}
		if weights[i] != 1 {
			if l, err = G.HadamardProd(l, scalar(dt, weights[i])); err != nil {
				return nil, errors.Wrapf(err, "losses: %s: weight of dim %d", loss, m)
			}
		}
		if sum == nil {
			sum = l
		} else if sum, err = G.Add(sum, l); err != nil {
			return nil, errors.Wrapf(err, "losses: %s: sum over dims", loss)
		}
	}
	return sum, nil
}

// matryoshka_infonce trains bi-encoders on contrastive batches, InfoNCE on every prefix in
// Inputs.Dims weighted by Inputs.DimWeights (a Mask applies to every prefix).
func init() {
	Register(Spec{Name: "matryoshka_infonce", Batch: Contrastive, Build: func(in Inputs) (*G.Node, error) {
		return matryoshkaInfoNCE(in.Q, in.P, in.Mask, in.Dims, in.DimWeights, in.Temperature, in.Similarity)
	}})
}
