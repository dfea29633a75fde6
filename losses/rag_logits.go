package losses

import (
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// RetrievalLogits computes the retrieval logits s [B,K] that the RAG losses take: the score of
// each query against its own K retrieved passages, divided by the temperature.
//
//	s_bk = sim(q_b, d_{b*K+k}) / tau
//
// Inputs: q [B,H] query embeddings (the query tower's output, differentiated); d [B*K,H] the
// candidates' passage embeddings, row b*K+k the k-th candidate of query b (in joint RAG training
// they come from the index built at the start: a constant, though the op differentiates with
// respect to d as well); k = K >= 1; tau > 0; sim Dot or Cosine (rows normalised with NormEps
// as in InfoNCE, so a query scores its candidates exactly as the exact inner-product index does
// with normalised vectors). q and d are float32 or float64.
//
// Reference: Lewis et al. 2020 (RAG), p_eta(z|x) proportional to exp(d(z)·q(x)); the temperature
// as in Izacard and Grave 2021 and RePlug (Shi et al. 2023).
func RetrievalLogits(q, d *G.Node, k int, tau float64, sim Similarity) (*G.Node, error) {
	const loss = "RetrievalLogits"
	dt, err := floatDtype(loss, []string{"q", "d"}, q, d)
	if err != nil {
		return nil, err
	}
	if err := validTau(loss, "temperature", tau); err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, errors.Errorf("losses: %s: K = %d, want >= 1", loss, k)
	}
	if err := wantShape(loss, "q", q, -1, -1); err != nil {
		return nil, err
	}
	b, h := q.Shape()[0], q.Shape()[1]
	if err := wantShape(loss, "d", d, b*k, h); err != nil {
		return nil, err
	}
	if err := applySimilarity(loss, sim, &q, &d); err != nil {
		return nil, err
	}
	// Repeat each query K times (a constant [B*K,B] selection matrix times q), multiply by the
	// candidates elementwise, sum over H.
	rep := make([]float64, b*k*b)
	for i := 0; i < b; i++ {
		for j := 0; j < k; j++ {
			rep[(i*k+j)*b+i] = 1
		}
	}
	r := G.NewConstant(fromFloat64(rep, tensor.Shape{b * k, b}, dt), G.WithName(loss+".repeat"))
	qr, err := G.Mul(r, q)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: repeat queries", loss)
	}
	prod, err := G.HadamardProd(qr, d)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", loss)
	}
	dots, err := G.Sum(prod, 1) // [B*K]
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: sum over H", loss)
	}
	s, err := G.Reshape(dots, tensor.Shape{b, k})
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s: reshape", loss)
	}
	if s, err = G.HadamardProd(s, scalar(dt, 1/tau)); err != nil {
		return nil, errors.Wrapf(err, "losses: %s: scale by 1/tau", loss)
	}
	return s, nil
}
