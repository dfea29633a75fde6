package losses

import (
	"fmt"
	"hash/fnv"
	"math"

	"github.com/pkg/errors"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TokenMasking says how MaxSim treats a passage token whose mask is 0 (padding, a skiplisted
// punctuation token).
type TokenMasking int

const (
	// MaskExclude removes masked passage tokens from the max: a query token's score is the
	// largest similarity over the passage's unmasked tokens, and 0 when it has none (ColBERT's
	// colbert_score_reduce sets padded scores to -9999 before the max).
	MaskExclude TokenMasking = iota
	// MaskZero multiplies similarities by the mask before the max, as PyLate's colbert_scores
	// does: a masked token still competes with similarity 0, so a query token's score is never
	// below 0 when its passage holds a masked token. Use it to reproduce PyLate's training.
	MaskZero
)

func (m TokenMasking) String() string {
	switch m {
	case MaskExclude:
		return "exclude"
	case MaskZero:
		return "zero"
	}
	return fmt.Sprintf("TokenMasking(%d)", int(m))
}

// ParseTokenMasking reads "exclude" or "zero" (as written in a recipe).
func ParseTokenMasking(s string) (TokenMasking, error) {
	switch s {
	case "exclude", "":
		return MaskExclude, nil
	case "zero", "pylate":
		return MaskZero, nil
	}
	return 0, fmt.Errorf("losses: unknown token masking %q (want \"exclude\" or \"zero\")", s)
}

// TokenMasks are the token masks of a late-interaction batch: Q [B,Lq] over the query tokens
// and P [N,Ld] over the passage tokens, 1 for a token that is scored and 0 for one that is not
// (padding, punctuation on the skiplist); nil scores every token. They are constants of the
// loss (no gradient) in the embeddings' dtype; any value other than 0 or 1 makes the machine
// fail naming the element. Mode says how a masked passage token enters the max.
type TokenMasks struct {
	Q, P *G.Node
	Mode TokenMasking
}

// MaxSim is ColBERT's late-interaction score of every query against every passage:
//
//	s(q_b, p_n) = sum_{i : qmask_bi = 1} max_{j : pmask_nj = 1} q_bi · p_nj
//
// (Khattab & Zaharia 2020, "ColBERT", eq. 3), with masked passage tokens excluded from the max
// or counted as similarity 0 (tm.Mode). Inputs: q [B,Lq,D] query token embeddings, p [N,Ld,D]
// passage token embeddings (float32 or float64, the same), tm their token masks. Output [B,N].
// The similarity is the plain inner product: normalise the token vectors first for ColBERT's
// cosine. Gradient: each query token's output gradient goes to the one passage token that
// attains its max, the first such token when several tie (as torch.max(dim) returns the first
// maximal index and routes the gradient to it); a query token whose max is a masked token
// under MaskZero, or a masked query token, passes no gradient. Cost O(B N Lq Ld D) in the
// forward pass (one [Lq,D]x[D,Ld] GEMM per scored pair) and once more in the backward kernel,
// which recomputes the argmax and returns both gradients; float64 inside, deterministic.
func MaxSim(q, p *G.Node, tm TokenMasks) (*G.Node, error) {
	return maxSim("MaxSim", q, p, tm, nil, 0)
}

// MaxSimLists is MaxSim over each query's own candidates: out[b,k] = s(q_b, p_{cand[b][k]}),
// [B,K], where cand holds B rows of K passage indices into p (a knowledge-distillation batch,
// PyLate's colbert_kd_scores). Only the listed pairs are computed.
func MaxSimLists(q, p *G.Node, tm TokenMasks, cand [][]int) (*G.Node, error) {
	if len(cand) == 0 || len(cand[0]) == 0 {
		return nil, errors.New("losses: MaxSimLists: no candidates")
	}
	k := len(cand[0])
	flat := make([]int, 0, len(cand)*k)
	for b, row := range cand {
		if len(row) != k {
			return nil, errors.Errorf("losses: MaxSimLists: cand[%d] has %d candidates, cand[0] has %d", b, len(row), k)
		}
		flat = append(flat, row...)
	}
	return maxSim("MaxSimLists", q, p, tm, flat, k)
}

// maxSim checks the inputs and applies the op; cand nil scores all pairs.
func maxSim(loss string, q, p *G.Node, tm TokenMasks, cand []int, k int) (*G.Node, error) {
	dt, err := floatDtype(loss, []string{"q", "p"}, q, p)
	if err != nil {
		return nil, err
	}
	if err := wantShape(loss, "q", q, -1, -1, -1); err != nil {
		return nil, err
	}
	b, lq, d := q.Shape()[0], q.Shape()[1], q.Shape()[2]
	if err := wantShape(loss, "p", p, -1, -1, d); err != nil {
		return nil, err
	}
	n, ld := p.Shape()[0], p.Shape()[1]
	if cand != nil {
		if len(cand) != b*k {
			return nil, errors.Errorf("losses: %s: %d candidate rows for %d queries", loss, len(cand)/k, b)
		}
		for i, c := range cand {
			if c < 0 || c >= n {
				return nil, errors.Errorf("losses: %s: cand[%d][%d] = %d, want a passage in [0, %d)", loss, i/k, i%k, c, n)
			}
		}
	}
	if tm.Mode != MaskExclude && tm.Mode != MaskZero {
		return nil, errors.Errorf("losses: %s: unknown token masking %v", loss, tm.Mode)
	}
	qm, err := tokenMask(loss, "token mask Q", tm.Q, q.Graph(), dt, b, lq)
	if err != nil {
		return nil, err
	}
	pm, err := tokenMask(loss, "token mask P", tm.P, q.Graph(), dt, n, ld)
	if err != nil {
		return nil, err
	}
	return newMaxSimOp(cand, k, tm.Mode).apply(q, p, qm, pm)
}

// tokenMask returns m after checking its shape and dtype, or an all-ones constant when m is nil.
func tokenMask(loss, name string, m *G.Node, g *G.ExprGraph, dt tensor.Dtype, rows, cols int) (*G.Node, error) {
	if m == nil {
		ones := make([]float64, rows*cols)
		for i := range ones {
			ones[i] = 1
		}
		return G.NewConstant(fromFloat64(ones, tensor.Shape{rows, cols}, dt), G.WithName(fmt.Sprintf("%s.ones%dx%d", loss, rows, cols))), nil
	}
	if d, err := nodeDtype(m); err != nil || d != dt {
		return nil, errors.Errorf("losses: %s: %s is %v, want %v", loss, name, d, dt)
	}
	if err := wantShape(loss, name, m, rows, cols); err != nil {
		return nil, err
	}
	return m, nil
}

// maxSimKernel holds the pairs a MaxSim op scores and the masking rule.
type maxSimKernel struct {
	cand []int // nil: every (b, n); else B*K passage indices
	k    int
	mode TokenMasking
}

// dims reads B, Lq, D, N, Ld and K from the four inputs and checks the masks.
func (m maxSimKernel) dims(in []arr) (b, lq, d, n, ld, k int, err error) {
	b, lq, d = in[0].shape[0], in[0].shape[1], in[0].shape[2]
	n, ld = in[1].shape[0], in[1].shape[1]
	k = n
	if m.cand != nil {
		k = m.k
	}
	for w, name := range []string{"query", "passage"} {
		for i, v := range in[2+w].data {
			if v != 0 && v != 1 {
				c := in[2+w].shape[1]
				return 0, 0, 0, 0, 0, 0, errors.Errorf("losses: MaxSim: %s token mask[%d][%d] = %g, want 0 or 1", name, i/c, i%c, v)
			}
		}
	}
	return b, lq, d, n, ld, k, nil
}

// argmax calls f(b, kk, nIdx, i, j) for every scored query token i of every pair (b, kk) with the
// passage token j that attains its max (j = -1 when the max is a masked token's 0 under
// MaskZero or no token is unmasked), and v the max's value (0 when j = -1).
func (m maxSimKernel) argmax(in []arr, f func(b, kk, nIdx, i, j int, v float64)) error {
	b, lq, d, _, ld, k, err := m.dims(in)
	if err != nil {
		return err
	}
	q, p, qm, pm := in[0].data, in[1].data, in[2].data, in[3].data
	sims := make([]float64, lq*ld) // q_b p_n^T, one GEMM per scored pair
	for bi := 0; bi < b; bi++ {
		for kk := 0; kk < k; kk++ {
			nIdx := kk
			if m.cand != nil {
				nIdx = m.cand[bi*k+kk]
			}
			if lq > 0 && ld > 0 && d > 0 {
				gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, lq, ld, d, 1,
					q[bi*lq*d:(bi+1)*lq*d], d, p[nIdx*ld*d:(nIdx+1)*ld*d], d, 0, sims, ld)
			}
			for i := 0; i < lq; i++ {
				if qm[bi*lq+i] == 0 {
					continue
				}
				best, arg, seen := math.Inf(-1), -1, false
				for j := 0; j < ld; j++ {
					v, jj := sims[i*ld+j], j
					if pm[nIdx*ld+j] == 0 {
						if m.mode != MaskZero {
							continue
						}
						v, jj = 0, -1
					}
					if !seen || v > best { // strict: the first maximal token wins a tie
						best, arg, seen = v, jj, true
					}
				}
				if !seen {
					best = 0
				}
				f(bi, kk, nIdx, i, arg, best)
			}
		}
	}
	return nil
}

func newMaxSimOp(cand []int, k int, mode TokenMasking) *fop {
	m := maxSimKernel{cand: cand, k: k, mode: mode}
	h := fnv.New64a()
	for _, c := range cand {
		fmt.Fprintf(h, "%d,", c)
	}
	name := fmt.Sprintf("MaxSim(mask=%v,K=%d,cand=%x)", mode, k, h.Sum64())
	if cand == nil {
		name = fmt.Sprintf("MaxSim(mask=%v)", mode)
	}
	// One backward kernel computes the argmax once and returns dq and dp flattened end to end.
	gradOp := &fop{
		name:    name + "Grad",
		inDims:  []int{3, 3, 2, 2, 2},
		outDims: 1,
		shape: func(in []tensor.Shape) (tensor.Shape, error) {
			return tensor.Shape{in[0].TotalSize() + in[1].TotalSize()}, nil
		},
		fwd: func(in []arr) ([]float64, error) {
			lq, d, ld, k := in[0].shape[1], in[0].shape[2], in[1].shape[1], in[4].shape[1]
			q, p, g := in[0].data, in[1].data, in[4].data
			out := make([]float64, len(q)+len(p))
			gq, gp := out[:len(q)], out[len(q):]
			err := m.argmax(in[:4], func(b, kk, nIdx, i, j int, _ float64) {
				gv := g[b*k+kk]
				if j < 0 || gv == 0 {
					return
				}
				qi, pj := (b*lq+i)*d, (nIdx*ld+j)*d
				for c := 0; c < d; c++ {
					gq[qi+c] += gv * p[pj+c]
					gp[pj+c] += gv * q[qi+c]
				}
			})
			return out, err
		},
	}
	return &fop{
		name:    name,
		inDims:  []int{3, 3, 2, 2},
		outDims: 2,
		shape: func(in []tensor.Shape) (tensor.Shape, error) {
			b, lq, d, n, ld := in[0][0], in[0][1], in[0][2], in[1][0], in[1][1]
			switch {
			case in[1][2] != d:
				return nil, errors.Errorf("%s: p has shape %v, q has %v (token dimension differs)", name, in[1], in[0])
			case !in[2].Eq(tensor.Shape{b, lq}):
				return nil, errors.Errorf("%s: query token mask has shape %v, want (%d, %d)", name, in[2], b, lq)
			case !in[3].Eq(tensor.Shape{n, ld}):
				return nil, errors.Errorf("%s: passage token mask has shape %v, want (%d, %d)", name, in[3], n, ld)
			}
			if cand != nil {
				return tensor.Shape{b, k}, nil
			}
			return tensor.Shape{b, n}, nil
		},
		fwd: func(in []arr) ([]float64, error) {
			b, k := in[0].shape[0], in[1].shape[0]
			if cand != nil {
				k = m.k
			}
			out := make([]float64, b*k)
			err := m.argmax(in, func(bi, kk, _, _, _ int, v float64) { out[bi*k+kk] += v })
			return out, err
		},
		diff: []bool{true, true, false, false},
		grad: func(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
			flat, err := gradOp.apply(in[0], in[1], in[2], in[3], g)
			if err != nil {
				return nil, err
			}
			nq, np := in[0].Shape().TotalSize(), in[1].Shape().TotalSize()
			var grads G.Nodes
			for w, r := range [][2]int{{0, nq}, {nq, nq + np}} {
				part, err := G.Slice(flat, G.S(r[0], r[1]))
				if err != nil {
					return nil, errors.Wrapf(err, "%s: gradient slice", name)
				}
				if part, err = G.Reshape(part, in[w].Shape().Clone()); err != nil {
					return nil, errors.Wrapf(err, "%s: gradient reshape", name)
				}
				grads = append(grads, part)
			}
			return append(grads, nil, nil), nil
		},
	}
}
