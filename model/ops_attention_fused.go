package model

import (
	"fmt"
	"sync"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// AttentionOptions are the parameters of Attention.
type AttentionOptions struct {
	L, Heads int     // sequence length and number of heads (H = Heads·dh)
	Scale    float64 // the score scale, 1/√dh in Vaswani et al.
	Causal   bool    // position i attends to keys j <= i only
	// Dropout is the probability of dropping an attention weight (0: none);
	// above 0 the masks come from RNG, so use it only in training graphs.
	Dropout float64
	RNG     *RNG
}

// Attention is masked multi-head scaled dot-product attention (Vaswani et
// al., 2017, eq. 1) in one op, per sequence b and head h:
//
//	out_bh = Dropout(MaskedSoftmax(Scale · q_bh·k_bhᵀ, mask_b)) · v_bh
//
// q, k and v are [B*L,H] (head h at columns h·dh..h·dh+dh-1), mask is [B,L];
// the result is [B*L,H]. It computes what AttentionScores, MaskedSoftmax,
// Dropout and AttentionContext compute, bit for bit (the same matrix
// products on the same blocks, the same softmax and dropout masks), but one
// (b,h) block at a time, so no [B,heads,L,L] tensor is ever held: the
// forward keeps its output and the run's dropout seed, and the gradient
// recomputes each block's weights from q and k, as FlashAttention does (Dao
// et al., 2022), and regenerates its dropout mask from the seed. Scratch is
// three L×L blocks per worker goroutine; the gradient holds dq, dk and dv
// once more ([3,B*L,H], sliced per input). With dropout each run takes one
// Uint64 from RNG.R, as Dropout does, so a graph draws the same seeds in the
// same order with either attention. Differentiable with respect to q, k and
// v; prefer it to the four separate ops everywhere but in tests.
func Attention(q, k, v, mask *gorgonia.Node, o AttentionOptions) (*gorgonia.Node, error) {
	kn := attnK{o: o}
	if o.Dropout != 0 {
		if !(o.Dropout > 0 && o.Dropout < 1) {
			return nil, fmt.Errorf("model: attention dropout probability %g outside [0,1)", o.Dropout)
		}
		if o.RNG == nil {
			return nil, fmt.Errorf("model: attention dropout needs a random source")
		}
		kn.seed = &attnSeed{}
	}
	op := newOp(kn)
	if kn.seed != nil {
		op = newRandomOp(kn)
		kn.seed.id = op.uid
	}
	n, err := gorgonia.ApplyOp(op, q, k, v, mask)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", kn.name(), err)
	}
	return n, nil
}

// attnSeed is the dropout seed of an Attention op's current run, drawn by
// the forward and read by the gradient; id tells ops apart.
type attnSeed struct {
	id  uint64
	val uint64
}

// attnK: (q, k, v, mask) -> out [B*L,H].
type attnK struct {
	o    AttentionOptions
	seed *attnSeed // nil without dropout
}

func (k attnK) name() string {
	o := k.o
	return fmt.Sprintf("Attention{L=%d,heads=%d,%g,causal=%t,dropout=%g}", o.L, o.Heads, o.Scale, o.Causal, o.Dropout)
}
func (attnK) typ() hm.Type                                    { return fnType(ft(2), ft(2), ft(2), ft(2), ft(2)) }
func (attnK) diff() []bool                                    { return []bool{true, true, true, false} }
func (k attnK) shape(in []tensor.Shape) (tensor.Shape, error) { return k.o.check(k.name(), in) }

// grads: the joint term computes dq, dk and dv as one [3,B*L,H] tensor;
// each input's gradient is its slice.
func (k attnK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{sliceK{i: 0}, []int{argJoint}}, {sliceK{i: 1}, []int{argJoint}}, {sliceK{i: 2}, []int{argJoint}}, nil}
}

func (k attnK) jointGrad(in []tensor.Shape) *gradTerm {
	return &gradTerm{attnGradK(k), []int{0, 1, 2, 3, argGrad}}
}

func (k attnK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	if k.seed != nil {
		if k.o.RNG == nil || k.o.RNG.R == nil {
			return fmt.Errorf("model: %s: no random source set", k.name())
		}
		k.seed.val = k.o.RNG.R.Uint64()
	}
	switch o := out.Data().(type) {
	case []float32:
		newAttnRun[float32](k, in).forward(o)
	case []float64:
		newAttnRun[float64](k, in).forward(o)
	}
	return nil
}

// check returns the output shape for inputs q, k, v (and mask) of shapes in.
func (o AttentionOptions) check(op string, in []tensor.Shape) (tensor.Shape, error) {
	q := in[0]
	if err := want2D(op, 0, q); err != nil {
		return nil, err
	}
	if o.L <= 0 || o.Heads <= 0 || q[0]%o.L != 0 || q[1]%o.Heads != 0 {
		return nil, fmt.Errorf("model: %s: q has shape %v, want [B*%d, heads*dh] with %d heads", op, q, o.L, o.Heads)
	}
	for i := 1; i < 3; i++ {
		if !in[i].Eq(q) {
			return nil, fmt.Errorf("model: %s: input %d has shape %v, want q's %v", op, i, in[i], q)
		}
	}
	if m := in[3]; len(m) != 2 || m[0] != q[0]/o.L || m[1] != o.L {
		return nil, fmt.Errorf("model: %s: mask has shape %v, want [%d,%d]", op, m, q[0]/o.L, o.L)
	}
	return q.Clone(), nil
}

// attnGradK: (q, k, v, mask, g) -> [3,B*L,H], the gradients of the loss
// with respect to q, k and v given g, its gradient with respect to the
// output of the attnK it was made from (whose seed it reads).
type attnGradK attnK

func (k attnGradK) name() string {
	n := attnK(k).name() + "Grad"
	if k.seed != nil {
		n += fmt.Sprintf("#%d", k.seed.id)
	}
	return n
}
func (attnGradK) typ() hm.Type                        { return fnType(ft(2), ft(2), ft(2), ft(2), ft(2), ft(3)) }
func (attnGradK) diff() []bool                        { return make([]bool, 5) }
func (attnGradK) grads(in []tensor.Shape) []*gradTerm { return nil }
func (k attnGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	s, err := k.o.check(k.name(), in[:4])
	if err != nil {
		return nil, err
	}
	if !in[4].Eq(s) {
		return nil, fmt.Errorf("model: %s: gradient has shape %v, want %v", k.name(), in[4], s)
	}
	return tensor.Shape{3, s[0], s[1]}, nil
}

func (k attnGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		newAttnRun[float32](attnK(k), in).backward(o, data[float32](in[4]))
	case []float64:
		newAttnRun[float64](attnK(k), in).backward(o, data[float64](in[4]))
	}
	return nil
}

// sliceK{i}: x [n,...] -> x[i].
type sliceK struct {
	noGrad
	i int
}

func (k sliceK) name() string { return fmt.Sprintf("Slice{%d}", k.i) }
func (sliceK) typ() hm.Type   { return fnType(ft(3), ft(2)) }
func (k sliceK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 3 || k.i >= in[0][0] {
		return nil, fmt.Errorf("model: %s: input has shape %v", k.name(), in[0])
	}
	return in[0][1:].Clone(), nil
}
func (k sliceK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	copyFrom(out, in[0], k.i*out.Size())
	return nil
}

// attnRun is one run of Attention or its gradient on concrete tensors.
type attnRun[T float] struct {
	q, k, v, mask []T
	l, nh, h, dh  int
	scale         T
	causal        bool
	drop          bool // with dropout: seed, threshold and keep as dropMaskK
	seed          uint64
	threshold     uint32
	keep          T
}

func newAttnRun[T float](k attnK, in []*tensor.Dense) *attnRun[T] {
	h := in[0].Shape()[1]
	r := &attnRun[T]{
		q: data[T](in[0]), k: data[T](in[1]), v: data[T](in[2]), mask: data[T](in[3]),
		l: k.o.L, nh: k.o.Heads, h: h, dh: h / k.o.Heads,
		scale: T(k.o.Scale), causal: k.o.Causal,
	}
	if k.seed != nil {
		r.drop, r.seed, r.threshold, r.keep = true, k.seed.val, dropThreshold(k.o.Dropout), T(1/(1-k.o.Dropout))
	}
	return r
}

// blocks calls f on every (b,h) block, in parallel as headMatMul, with
// rows the first element of the block in an [N,H] matrix and s, p, d three
// L×L scratch blocks of the calling goroutine.
func (r *attnRun[T]) blocks(f func(bh, rows int, s, p, d []T)) {
	l, nh, h, dh := r.l, r.nh, r.h, r.dh
	nb := len(r.q) / (l * h)
	parallelFor(nb*nh, l*l*dh, func(lo, hi int) {
		buf := getScratch[T](3 * l * l)
		defer putScratch(buf)
		s, p, d := (*buf)[:l*l], (*buf)[l*l:2*l*l], (*buf)[2*l*l:]
		for bh := lo; bh < hi; bh++ {
			b, hd := bh/nh, bh%nh
			f(bh, b*l*h+hd*dh, s, p, d)
		}
	})
}

// weights sets p to block bh's attention weights, as AttentionScores and
// MaskedSoftmax compute them, and with dropout d to its dropout mask (as
// dropMaskK draws it for the [B,heads,L,L] weights) and s to p ⊙ d (as
// ApplyMask); it returns the weights after dropout (s, or p without).
func (r *attnRun[T]) weights(bh, rows int, s, p, d []T) []T {
	l, h := r.l, r.h
	b := bh / r.nh
	gemm(false, true, l, l, r.dh, r.scale, r.q[rows:], h, r.k[rows:], h, 0, s, l)
	softmaxBlock(p, s, r.mask[b*l:(b+1)*l], r.causal)
	if !r.drop {
		return p
	}
	dropMaskAt(d, bh*l*l, r.seed, r.threshold, r.keep)
	mulRange(s, p, d)
	return s
}

func (r *attnRun[T]) forward(out []T) {
	l, h := r.l, r.h
	r.blocks(func(bh, rows int, s, p, d []T) {
		w := r.weights(bh, rows, s, p, d)
		gemm(false, false, l, r.dh, l, 1, w, l, r.v[rows:], h, 0, out[rows:], h)
	})
}

// backward writes dq, dk, dv (the three [N,H] slabs of out) given g, in
// the order and with the calls of the unfused ops' gradients:
//
//	dv = wᵀ·g            (AttentionContext, w the weights after dropout)
//	dw = g·vᵀ            (AttentionContext)
//	dp = dw ⊙ d          (ApplyMask)
//	ds = p ⊙ (dp - Σ dp·p) (MaskedSoftmax)
//	dq = Scale·ds·k, dk = Scale·dsᵀ·q (AttentionScores)
func (r *attnRun[T]) backward(out, g []T) {
	l, h, dh := r.l, r.h, r.dh
	n := len(r.q)
	dq, dk, dv := out[:n], out[n:2*n], out[2*n:]
	r.blocks(func(bh, rows int, s, p, d []T) {
		w := r.weights(bh, rows, s, p, d)
		gemm(true, false, l, dh, l, 1, w, l, g[rows:], h, 0, dv[rows:], h)
		gemm(false, true, l, l, dh, 1, g[rows:], h, r.v[rows:], h, 0, s, l)
		if r.drop {
			mulRange(s, s, d)
		}
		for i := 0; i < l; i++ {
			softmaxGradRow(s[i*l:(i+1)*l], p[i*l:(i+1)*l], s[i*l:(i+1)*l])
		}
		gemm(false, false, l, dh, l, r.scale, s, l, r.k[rows:], h, 0, dq[rows:], h)
		gemm(true, false, l, dh, l, r.scale, s, l, r.q[rows:], h, 0, dk[rows:], h)
	})
}

// softmaxBlock is maskedSoftmax on one (b,h) block: out = the masked
// softmax of the L rows of s (L×L) of a sequence with mask m (L values).
func softmaxBlock[T float](out, s, m []T, causal bool) { softmaxRows(out, s, m, len(m), causal) }

var scratch32, scratch64 sync.Pool

// getScratch returns a slice of n floats from a pool (contents undefined).
func getScratch[T float](n int) *[]T {
	p, _ := scratchPool[T]().Get().(*[]T)
	if p == nil || cap(*p) < n {
		p = new([]T)
		*p = make([]T, n)
	}
	*p = (*p)[:n]
	return p
}

func putScratch[T float](p *[]T) { scratchPool[T]().Put(p) }

func scratchPool[T float]() *sync.Pool {
	var z T
	if _, ok := any(z).(float32); ok {
		return &scratch32
	}
	return &scratch64
}
