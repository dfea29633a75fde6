package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CandidateScores returns each query's scores of its own candidates in a contrastive batch, the
// [B,K] scores a list loss (kl_distill) reads when it trains a bi-encoder:
//
//	out[i,0] = s(q_i, p_i)                  its positive
//	out[i,k] = s(q_i, p_{B+iM+k-1})         its k-th hard negative, k = 1..M
//
// Inputs: q [B,H]; p [N,H] with N = B(1+M), rows 0..B-1 the positives and B+iM..B+iM+M-1 the
// hard negatives of query i (the sampler's layout); sim Dot or Cosine (rows normalised with
// NormEps first). K = 1+M. The other queries' passages are not scored. Computed as the [B,N]
// score matrix masked to each row's own candidates and gathered by a constant [N,K] matrix, so
// the gradient reaches exactly the scores used.
func CandidateScores(q, p *G.Node, m int, sim Similarity) (*G.Node, error) {
	const loss = "CandidateScores"
	dt, err := floatDtype(loss, []string{"q", "p"}, q, p)
	if err != nil {
		return nil, err
	}
	if err := wantShape(loss, "q", q, -1, -1); err != nil {
		return nil, err
	}
	b, h, k := q.Shape()[0], q.Shape()[1], 1+m
	if m < 0 {
		return nil, errors.Errorf("losses: %s: %d hard negatives per query", loss, m)
	}
	if err := wantShape(loss, "p", p, b*k, h); err != nil {
		return nil, err
	}
	s, err := simScores(loss, sim, q, p) // [B,N]
	if err != nil {
		return nil, err
	}
	n := b * k
	own, gather := make([]float64, b*n), make([]float64, n*k)
	for i := range b {
		own[i*n+i] = 1
		for j := range m {
			own[i*n+b+i*m+j] = 1
		}
	}
	for c := range n {
		slot := 0
		if c >= b {
			slot = (c-b)%max(m, 1) + 1
		}
		gather[c*k+slot] = 1
	}
	ownN := G.NewMatrix(q.Graph(), dt, G.WithShape(b, n), G.WithValue(fromFloat64(own, tensor.Shape{b, n}, dt)), G.WithName("candidates.own"))
	gatherN := G.NewMatrix(q.Graph(), dt, G.WithShape(n, k), G.WithValue(fromFloat64(gather, tensor.Shape{n, k}, dt)), G.WithName("candidates.gather"))
	masked, err := G.HadamardProd(s, ownN)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: own candidates", loss)
	}
	out, err := G.Mul(masked, gatherN) // [B,K]
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: gather", loss)
	}
	return out, nil
}
