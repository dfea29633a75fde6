package losses

import (
	"fmt"
	"math"

	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// RAGSequenceInBatch is RAG-Sequence whose retrieval distribution is normalised over every
// candidate of the batch, not over the question's own K: the other questions' candidates are
// negatives that generate the target with probability 0 (in-batch negatives, as InfoNCE has).
//
//	p(z|x_b) = exp(s_bj) / sum_{j' kept} exp(s_bj')     over the N = B*K candidates of the batch
//	L        = mean_b -log sum_{k=1..K} p(z_{b*K+k} | x_b) prod_t p_theta(y_t | x_b, z_{b*K+k}, y_<t)
//
// Inputs: s [B,N] the retrieval logits of every question against every candidate of the batch
// (BatchRetrievalLogits), question b's own K candidates at columns b*K .. b*K+K-1; drop [B,N]
// 1 for a column to leave out of question b's normaliser (a repeat of one of its own candidates,
// or of a column already counted), 0 otherwise, never 1 on its own K; logp [B,K,T] and mask
// [B,T] as for RAGSequence. With B = 1 (N = K) it is RAGSequence. The gradient on s_b is
// p_b - gamma_b over the kept columns, divided by B, with gamma the posterior over the own
// candidates (0 on the others): the others' candidates are only pushed down.
//
// Reference: Lewis et al. 2020 (RAG-Sequence); the corpus-wide normaliser of REALM (Guu et al.
// 2020) approximated by the batch's candidates, as in-batch negatives do for dense retrieval
// (Karpukhin et al. 2020, DPR).
//
// Prefer it to RAGSequence when the retriever trains on few questions: renormalised over its
// own K, RAG-Sequence never says that a passage retrieved for another question is wrong for
// this one, and the passages that answer the training questions become hubs retrieved for
// every question.
func RAGSequenceInBatch(s, drop, logp, mask *G.Node) (*G.Node, error) {
	const loss = "RAGSequenceInBatch"
	if _, err := floatDtype(loss, []string{"s", "drop", "logp", "mask"}, s, drop, logp, mask); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "s", s, -1, -1); err != nil {
		return nil, err
	}
	b, n := s.Shape()[0], s.Shape()[1]
	if err := wantShape(loss, "drop", drop, b, n); err != nil {
		return nil, err
	}
	if err := wantShape(loss, "logp", logp, b, -1, -1); err != nil {
		return nil, err
	}
	k := logp.Shape()[1]
	if k < 1 || n != b*k {
		return nil, errors.Errorf("losses: %s: s has %d columns, want B*K = %d*%d", loss, n, b, k)
	}
	if err := wantShape(loss, "mask", mask, b, logp.Shape()[2]); err != nil {
		return nil, err
	}
	ownLogw, err := newInBatchLogwOp(k).apply(s, drop) // [B,K]
	if err != nil {
		return nil, err
	}
	joint, err := ragJoint(loss, ownLogw, logp, mask)
	if err != nil {
		return nil, err
	}
	lse, err := logSumExpRows(joint)
	if err != nil {
		return nil, err
	}
	return negMean(loss, lse)
}

// newInBatchLogwOp returns the op (s [B,N], drop [B,N]) -> [B,K]: the log-probability of
// each question's own K candidates under the softmax of its row over the kept columns,
// s_{b,bK+k} - logsumexp_{j: drop_bj = 0} s_bj. Its gradient on s is g_bk on the own columns
// minus softmax_kept(s_b)_j sum_k g_bk on every kept column (0 on the dropped ones).
func newInBatchLogwOp(k int) *fop {
	return &fop{
		name:    fmt.Sprintf("ragInBatchLogw(K=%d)", k),
		inDims:  []int{2, 2},
		outDims: 2,
		shape: func(in []tensor.Shape) (tensor.Shape, error) {
			if !in[0].Eq(in[1]) || in[0][1] != in[0][0]*k {
				return nil, errors.Errorf("ragInBatchLogw: s %v, drop %v, want both (B, B*%d)", in[0], in[1], k)
			}
			return tensor.Shape{in[0][0], k}, nil
		},
		fwd: func(in []arr) ([]float64, error) {
			lse, err := inBatchLSE(in[0], in[1], k)
			if err != nil {
				return nil, err
			}
			b, n := in[0].shape[0], in[0].shape[1]
			out := make([]float64, b*k)
			for i := range b {
				for j := range k {
					out[i*k+j] = in[0].data[i*n+i*k+j] - lse[i]
				}
			}
			return out, nil
		},
		diff: []bool{true, false},
		grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
			ds, err := newInBatchLogwGradOp(k).apply(in[0], in[1], g)
			return G.Nodes{ds, nil}, err
		},
	}
}

// inBatchLSE returns each row's log-sum-exp over its kept columns, checking drop.
func inBatchLSE(s, drop arr, k int) ([]float64, error) {
	b, n := s.shape[0], s.shape[1]
	lse := make([]float64, b)
	row := make([]float64, 0, n)
	for i := range b {
		row = row[:0]
		for j := range n {
			switch drop.data[i*n+j] {
			case 0:
				row = append(row, s.data[i*n+j])
			case 1:
				if j/k == i {
					return nil, errors.Errorf("losses: RAGSequenceInBatch: drop[%d][%d] = 1 on one of question %d's own candidates", i, j, i)
				}
			default:
				return nil, errors.Errorf("losses: RAGSequenceInBatch: drop[%d][%d] = %g, want 0 or 1", i, j, drop.data[i*n+j])
			}
		}
		lse[i] = lseRow(row)
	}
	return lse, nil
}

// newInBatchLogwGradOp is the gradient of newInBatchLogwOp on s, from (s, drop, g [B,K]).
func newInBatchLogwGradOp(k int) *fop {
	return &fop{
		name:    fmt.Sprintf("ragInBatchLogwGrad(K=%d)", k),
		inDims:  []int{2, 2, 2},
		outDims: 2,
		shape:   func(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil },
		fwd: func(in []arr) ([]float64, error) {
			s, drop, g := in[0], in[1], in[2].data
			lse, err := inBatchLSE(s, drop, k)
			if err != nil {
				return nil, err
			}
			b, n := s.shape[0], s.shape[1]
			out := make([]float64, b*n)
			for i := range b {
				var sum float64
				for j := range k {
					sum += g[i*k+j]
				}
				for j := range n {
					if drop.data[i*n+j] == 0 {
						out[i*n+j] = -math.Exp(s.data[i*n+j]-lse[i]) * sum
					}
				}
				for j := range k {
					out[i*n+i*k+j] += g[i*k+j]
				}
			}
			return out, nil
		},
	}
}

// BatchRetrievalLogits scores every query against every candidate of the batch: s_bj =
// sim(q_b, d_j) / tau, q [B,H], d [N,H] (row b*K+k the k-th candidate of query b when they come
// from RetrievalLogits' layout), sim Dot or Cosine (rows normalised as RetrievalLogits does).
// The result [B,N] is RAGSequenceInBatch's s; its block b*K .. b*K+K-1 of row b equals
// RetrievalLogits(q, d, K, tau, sim) row b.
func BatchRetrievalLogits(q, d *G.Node, tau float64, sim Similarity) (*G.Node, error) {
	const loss = "BatchRetrievalLogits"
	dt, err := floatDtype(loss, []string{"q", "d"}, q, d)
	if err != nil {
		return nil, err
	}
	if err := wantQueryRows(loss, q, "d", d, tau); err != nil {
		return nil, err
	}
	s, err := simScores(loss, sim, q, d)
	if err != nil {
		return nil, err
	}
	if s, err = G.HadamardProd(s, scalar(dt, 1/tau)); err != nil {
		return nil, errors.Wrapf(err, "losses: %s: scale by 1/tau", loss)
	}
	return s, nil
}
