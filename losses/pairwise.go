package losses

import (
	"github.com/pkg/errors"
	"github.com/ragtrain/ragtrain/model"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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
	return mean("Pairwise", sp)
}

// pairwise trains cross-encoders on lists whose slot 0 is the positive.
func init() { Register(Spec{Name: "pairwise", Batch: Lists, Build: buildPairwise}) }

// buildPairwise pairs each list's positive (slot 0) with each of its K-1 other candidates.
func buildPairwise(in Inputs) (*G.Node, error) {
	B, K := in.B, in.K
	g := in.Scores.Graph()
	col, err := G.Reshape(in.Scores, tensor.Shape{B * K, 1})
	if err != nil {
		return nil, err
	}
	pos, neg := make([]int, 0, B*(K-1)), make([]int, 0, B*(K-1))
	for i := range B {
		for j := 1; j < K; j++ {
			pos, neg = append(pos, i*K), append(neg, i*K+j)
		}
	}
	idx := func(v []int, name string) *G.Node {
		return G.NewVector(g, tensor.Int, G.WithShape(len(v)), G.WithName(name),
			G.WithValue(tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v))))
	}
	aPos, err := model.Gather(col, idx(pos, "pairs.pos"))
	if err != nil {
		return nil, err
	}
	aNeg, err := model.Gather(col, idx(neg, "pairs.neg"))
	if err != nil {
		return nil, err
	}
	return Pairwise(aPos, aNeg)
}
