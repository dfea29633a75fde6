package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
)

// Pairwise is the RankNet loss: it raises the score of each positive above the score of the
// negative it is paired with.
//
//	L = mean_i -log sigma(a+_i - a-_i) = mean_i softplus(a-_i - a+_i)
//
// Inputs: aPos and aNeg, scores of the same shape (for example [B] for one pair per query, or
// [B,K] for K pairs per query), float32 or float64; element i of aPos is paired with element i
// of aNeg. Softplus is computed as max(x,0) + log1p(exp(-|x|)), so large margins neither
// overflow nor round to zero gradient early.
//
// Reference: Burges et al. 2005, "Learning to Rank using Gradient Descent" (RankNet).
//
// Prefer it for rerankers (cross-encoders) trained on (positive, negative) pairs, or when
// scores are not comparable across queries. Use InfoNCE when a whole batch of negatives can be
// scored at once, Listwise when graded labels over a candidate list are available.
func Pairwise(aPos, aNeg *G.Node) (*G.Node, error) {
	if _, err := floatDtype("Pairwise", []string{"aPos", "aNeg"}, aPos, aNeg); err != nil {
		return nil, err
	}
	if aPos.Dims() == 0 || !aPos.Shape().Eq(aNeg.Shape()) {
		return nil, errors.Errorf("losses: Pairwise: aPos has shape %v and aNeg %v, want the same shape of rank >= 1", aPos.Shape(), aNeg.Shape())
	}
	diff, err := G.Sub(aNeg, aPos)
	if err != nil {
		return nil, errors.Wrap(err, "losses: Pairwise")
	}
	sp, err := softplus(diff)
	if err != nil {
		return nil, err
	}
	out, err := G.Mean(sp)
	if err != nil {
		return nil, errors.Wrap(err, "losses: Pairwise: mean")
	}
	return out, nil
}
