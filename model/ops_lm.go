package model

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LMLogProb is a language-model head with tied embeddings fused with its
// log-softmax and the look-up of the target's log-probability:
//
//	out[m] = log softmax(x[pos[m]] · Eᵀ)[tgt[m]]
//	       = x[pos[m]]·E[tgt[m]] - log Σ_v exp(x[pos[m]]·E[v])
//
// x is [N,H] (token states, B*L rows), E is [V,H] (the word embedding
// matrix, shared with the input side: Press and Wolf 2017, "Using the Output
// Embedding to Improve Language Models"), pos and tgt are int tensors of M
// entries: the row of x whose next token is predicted and that token's id.
// An entry with pos[m] = -1 is padding: its output is 0 and it passes no
// gradient (tgt[m] is then ignored). The result is [M]. Run fails naming the
// entry when pos is outside [-1,N) or tgt outside [0,V).
//
// Only the M selected rows are multiplied by Eᵀ, so a loss on answer tokens
// costs M·V·H, not N·V·H, and no [N,V] logits node enters the graph. The
// gradients are, with p = softmax of the row's logits and g the output's
// gradient,
//
//	dx[pos[m]] += g[m] (E[tgt[m]] - Σ_v p_v E[v])
//	dE[v]      += g[m] (1[v = tgt[m]] - p_v) x[pos[m]]
//
// The forward pass keeps the [M,V] probabilities for the backward pass of the
// same run (the two gradient ops share them), so each op node belongs to one
// graph, run by one machine at a time.
func LMLogProb(x, emb, pos, tgt *gorgonia.Node) (*gorgonia.Node, error) {
	c := &lmCache{id: lmSeq.Add(1)}
	return apply(lmK{c: c}, x, emb, pos, tgt)
}

var lmSeq atomic.Uint64

// lmCache holds what the forward pass of one LMLogProb node leaves for its
// gradients: the gathered rows [M,H] and the softmax [M,V], which the first
// gradient op of the run turns into D = g ⊙ (onehot(tgt) - p) in place.
type lmCache struct {
	id       uint64
	fwd, dAt uint64 // forward runs so far; the forward run whose D the buffers hold (0: none)
	p32, s32 []float32
	p64, s64 []float64
}

type lmK struct{ c *lmCache }

func (k lmK) name() string { return fmt.Sprintf("LMLogProb#%d", k.c.id) }
func (lmK) typ() hm.Type   { return fnType(ft(2), ft(2), it(1), it(1), ft(1)) }
func (lmK) diff() []bool   { return []bool{true, true, false, false} }
func (k lmK) grads(in []tensor.Shape) []*gradTerm {
	args := []int{0, 1, 2, 3, argGrad}
	return []*gradTerm{
		{k: lmGradK{c: k.c, wrtEmb: false}, args: args},
		{k: lmGradK{c: k.c, wrtEmb: true}, args: args},
		nil, nil,
	}
}

func (k lmK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := lmShapes(k.name(), in); err != nil {
		return nil, err
	}
	return tensor.Shape{in[2][0]}, nil
}

func lmShapes(op string, in []tensor.Shape) error {
	if err := want2D(op, 0, in[0]); err != nil {
		return err
	}
	if err := want2D(op, 1, in[1]); err != nil {
		return err
	}
	if in[0][1] != in[1][1] {
		return fmt.Errorf("model: %s: states %v and embeddings %v differ in width", op, in[0], in[1])
	}
	if err := wantVec(op, 2, in[2], -1); err != nil {
		return err
	}
	return wantVec(op, 3, in[3], in[2][0])
}

// lmIndices checks pos and tgt against N rows and V tokens.
func lmIndices(op string, in []*tensor.Dense) (pos, tgt []int, err error) {
	if pos, err = ints(op, in[2]); err != nil {
		return nil, nil, err
	}
	if tgt, err = ints(op, in[3]); err != nil {
		return nil, nil, err
	}
	n, v := in[0].Shape()[0], in[1].Shape()[0]
	for m, p := range pos {
		if p < -1 || p >= n {
			return nil, nil, fmt.Errorf("model: %s: pos[%d] = %d is out of range [-1,%d)", op, m, p, n)
		}
		if p >= 0 && (tgt[m] < 0 || tgt[m] >= v) {
			return nil, nil, fmt.Errorf("model: %s: tgt[%d] = %d is out of range [0,%d)", op, m, tgt[m], v)
		}
	}
	return pos, tgt, nil
}

func (k lmK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	pos, tgt, err := lmIndices(k.name(), in)
	if err != nil {
		return err
	}
	h, v := in[0].Shape()[1], in[1].Shape()[0]
	c := k.c
	c.fwd++
	switch o := out.Data().(type) {
	case []float32:
		c.s32, c.p32 = grow(c.s32, len(pos)*h), grow(c.p32, len(pos)*v)
		lmForward(o, data[float32](in[0]), data[float32](in[1]), pos, tgt, h, v, c.s32, c.p32)
	case []float64:
		c.s64, c.p64 = grow(c.s64, len(pos)*h), grow(c.p64, len(pos)*v)
		lmForward(o, data[float64](in[0]), data[float64](in[1]), pos, tgt, h, v, c.s64, c.p64)
	}
	return nil
}

func grow[T float](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// lmForward writes out[m] and leaves the gathered rows in sel [M,H] and the
// softmax in p [M,V] (zero rows for padding entries).
func lmForward[T float](out, x, emb []T, pos, tgt []int, h, v int, sel, p []T) {
	for m, r := range pos {
		if r < 0 {
			clear(sel[m*h : (m+1)*h])
			continue
		}
		copy(sel[m*h:(m+1)*h], x[r*h:(r+1)*h])
	}
	gemm(false, true, len(pos), v, h, 1, sel, h, emb, h, 0, p, v)
	parallelFor(len(pos), 4*v, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			row := p[m*v : (m+1)*v]
			if pos[m] < 0 {
				out[m] = 0
				clear(row)
				continue
			}
			zt := float64(row[tgt[m]])
			if r32, ok := any(row).([]float32); ok && haveAVX2FMA {
				out[m] = T(zt - lmSoftmax32(r32))
				continue
			}
			mx := row[0]
			for _, z := range row {
				if z > mx {
					mx = z
				}
			}
			var s float64
			for j, z := range row {
				e := expLE0[T](float64(z - mx))
				row[j] = T(e)
				s += e
			}
			lse := float64(mx) + math.Log(s)
			out[m] = T(zt - lse) // from the target's logit, not from its rounded exp
			inv := 1 / s
			for j := range row {
				row[j] = T(float64(row[j]) * inv)
			}
		}
	})
}

// lmSoftmax32 turns the logits row into its softmax in place, with the
// maximum and the exponentials in AVX2 (maxVec, expShiftVec), and returns
// its log-sum-exp.
func lmSoftmax32(row []float32) float64 {
	n, mx := maxVec(row)
	for _, z := range row[n:] {
		if z > mx {
			mx = z
		}
	}
	n, s32 := expShiftVec(row, row, mx)
	s := float64(s32)
	for j, z := range row[n:] {
		e := expNeg32(float64(z - mx))
		row[n+j] = float32(e)
		s += e
	}
	inv := float32(1 / s)
	for j := range row {
		row[j] *= inv
	}
	return float64(mx) + math.Log(s)
}

// lmGradK is the gradient of LMLogProb with respect to the states (wrtEmb
// false: [N,H]) or to the embeddings (wrtEmb true: [V,H]), from the inputs
// and the output gradient g [M].
type lmGradK struct {
	noGrad
	c      *lmCache
	wrtEmb bool
}

func (k lmGradK) name() string {
	return fmt.Sprintf("LMLogProbGrad#%d{emb=%t}", k.c.id, k.wrtEmb)
}
func (lmGradK) typ() hm.Type { return fnType(ft(2), ft(2), it(1), it(1), ft(1), ft(2)) }

func (k lmGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := lmShapes(k.name(), in[:4]); err != nil {
		return nil, err
	}
	if err := wantVec(k.name(), 4, in[4], in[2][0]); err != nil {
		return nil, err
	}
	if k.wrtEmb {
		return in[1].Clone(), nil
	}
	return in[0].Clone(), nil
}

func (k lmGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	pos, tgt, err := lmIndices(k.name(), in)
	if err != nil {
		return err
	}
	h, v := in[0].Shape()[1], in[1].Shape()[0]
	switch o := out.Data().(type) {
	case []float32:
		lmGrad(k.c, &k.c.s32, &k.c.p32, o, data[float32](in[0]), data[float32](in[1]), data[float32](in[4]), pos, tgt, h, v, k.wrtEmb)
	case []float64:
		lmGrad(k.c, &k.c.s64, &k.c.p64, o, data[float64](in[0]), data[float64](in[1]), data[float64](in[4]), pos, tgt, h, v, k.wrtEmb)
	}
	return nil
}

// lmGrad writes the gradient into o from the softmax and states the cache holds in *s, *p (one
// pair per element type) for the node's forward pass, recomputing them when they are not there.
func lmGrad[T float](c *lmCache, s, p *[]T, o, x, emb, g []T, pos, tgt []int, h, v int, wrtEmb bool) {
	m := len(pos)
	if c.fwd == 0 || len(*p) != m*v || len(*s) != m*h {
		// No forward pass of this node has run on these shapes: recompute it.
		c.fwd++
		*s, *p = grow(*s, m*h), grow(*p, m*v)
		lmForward(make([]T, m), x, emb, pos, tgt, h, v, *s, *p)
	}
	if c.dAt != c.fwd {
		lmDelta(*p, g, pos, tgt, v)
		c.dAt = c.fwd
	}
	lmBackward(o, emb, pos, h, v, *s, *p, wrtEmb)
}

// lmDelta turns the softmax p [M,V] into D = g ⊙ (onehot(tgt) - p), the
// gradient of the loss with respect to the logits, in place.
func lmDelta[T float](p, g []T, pos, tgt []int, v int) {
	for m := range pos {
		row := p[m*v : (m+1)*v]
		if pos[m] < 0 {
			clear(row)
			continue
		}
		gm := g[m]
		for j := range row {
			row[j] *= -gm
		}
		row[tgt[m]] += gm
	}
}

// lmBackward writes dE = Dᵀ·sel [V,H] or dx [N,H] (D·E scattered to the rows
// pos).
func lmBackward[T float](out, emb []T, pos []int, h, v int, sel, d []T, wrtEmb bool) {
	m := len(pos)
	if wrtEmb {
		gemm(true, false, v, h, m, 1, d, v, sel, h, 0, out, h)
		return
	}
	clear(out)
	rows := make([]T, m*h)
	gemm(false, false, m, h, v, 1, d, v, emb, h, 0, rows, h)
	for i, r := range pos {
		if r >= 0 {
			addInto(out[r*h:(r+1)*h], rows[i*h:(i+1)*h])
		}
	}
}
