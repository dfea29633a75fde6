package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CrossAttentionOptions are the parameters of CrossAttention.
type CrossAttentionOptions struct {
	Lq, Lk int     // query length (decoder positions) and key length (memory positions) per sequence
	Heads  int     // attention heads (H = Heads·dh)
	Scale  float64 // the score scale, 1/√dh in Vaswani et al.
}

// CrossAttention is multi-head scaled dot-product attention of Lq query rows over Lk memory rows
// per sequence (Vaswani et al. 2017, eq. 1; the encoder-decoder attention of their section
// 3.2.3, which Fusion-in-Decoder's decoder runs over the concatenated passage encodings,
// Izacard & Grave 2021), per sequence b and head h:
//
//	out_bh = MaskedSoftmax(Scale · q_bh·k_bhᵀ, mask_b) · v_bh     (Lq×Lk weights, no causal mask)
//
// q is [B*Lq,H], k and v are [B*Lk,H] (head h at columns h·dh..h·dh+dh-1), mask is [B,Lk] (0
// drops a memory position; every sequence needs one kept position); the result is [B*Lq,H].
// With Lq = Lk it computes Attention's bits (no causal mask, no dropout). Like Attention it holds
// no [B,heads,Lq,Lk] tensor: the gradient recomputes each block's weights. Differentiable with
// respect to q, k and v.
func CrossAttention(q, k, v, mask *gorgonia.Node, o CrossAttentionOptions) (*gorgonia.Node, error) {
	kn := xattnK{o: o}
	n, err := gorgonia.ApplyOp(newOp(kn), q, k, v, mask)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", kn.name(), err)
	}
	return n, nil
}

// xattnK: (q, k, v, mask) -> out [B*Lq,H].
type xattnK struct{ o CrossAttentionOptions }

func (k xattnK) name() string {
	return fmt.Sprintf("CrossAttention{Lq=%d,Lk=%d,heads=%d,%g}", k.o.Lq, k.o.Lk, k.o.Heads, k.o.Scale)
}
func (xattnK) typ() hm.Type                                    { return fnType(ft(2), ft(2), ft(2), ft(2), ft(2)) }
func (xattnK) diff() []bool                                    { return []bool{true, true, true, false} }
func (k xattnK) shape(in []tensor.Shape) (tensor.Shape, error) { return k.o.check(k.name(), in) }

// grads: the joint term computes dq, dk and dv stacked as one [B*Lq+2·B*Lk, H] matrix; each
// input's gradient is its block of rows.
func (k xattnK) grads(in []tensor.Shape) []*gradTerm {
	nq, nk := in[0][0], in[1][0]
	return []*gradTerm{{rowsK{lo: 0, n: nq}, []int{argJoint}}, {rowsK{lo: nq, n: nk}, []int{argJoint}}, {rowsK{lo: nq + nk, n: nk}, []int{argJoint}}, nil}
}

func (k xattnK) jointGrad(in []tensor.Shape) *gradTerm {
	return &gradTerm{xattnGradK(k), []int{0, 1, 2, 3, argGrad}}
}

func (k xattnK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		newXattnRun[float32](k.o, in).forward(o)
	case []float64:
		newXattnRun[float64](k.o, in).forward(o)
	}
	return nil
}

// check returns the output shape for inputs q, k, v and mask of shapes in.
func (o CrossAttentionOptions) check(op string, in []tensor.Shape) (tensor.Shape, error) {
	q, kk := in[0], in[1]
	for i := 0; i < 3; i++ {
		if err := want2D(op, i, in[i]); err != nil {
			return nil, err
		}
	}
	if o.Lq <= 0 || o.Lk <= 0 || o.Heads <= 0 || q[0]%o.Lq != 0 || q[1]%o.Heads != 0 {
		return nil, fmt.Errorf("model: %s: q has shape %v, want [B*%d, heads*dh] with %d heads", op, q, o.Lq, o.Heads)
	}
	B := q[0] / o.Lq
	if kk[0] != B*o.Lk || kk[1] != q[1] || !in[2].Eq(kk) {
		return nil, fmt.Errorf("model: %s: k %v and v %v, want [%d,%d] each", op, kk, in[2], B*o.Lk, q[1])
	}
	if m := in[3]; len(m) != 2 || m[0] != B || m[1] != o.Lk {
		return nil, fmt.Errorf("model: %s: mask has shape %v, want [%d,%d]", op, m, B, o.Lk)
	}
	return q.Clone(), nil
}

// xattnGradK: (q, k, v, mask, g) -> [B*Lq+2·B*Lk, H]: dq, dk, dv given g, the gradient of the
// loss with respect to the output.
type xattnGradK xattnK

func (k xattnGradK) name() string                      { return xattnK(k).name() + "Grad" }
func (xattnGradK) typ() hm.Type                        { return fnType(ft(2), ft(2), ft(2), ft(2), ft(2), ft(2)) }
func (xattnGradK) diff() []bool                        { return make([]bool, 5) }
func (xattnGradK) grads(in []tensor.Shape) []*gradTerm { return nil }
func (k xattnGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	s, err := k.o.check(k.name(), in[:4])
	if err != nil {
		return nil, err
	}
	if !in[4].Eq(s) {
		return nil, fmt.Errorf("model: %s: gradient has shape %v, want %v", k.name(), in[4], s)
	}
	return tensor.Shape{s[0] + 2*in[1][0], s[1]}, nil
}

func (k xattnGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		newXattnRun[float32](k.o, in).backward(o, data[float32](in[4]))
	case []float64:
		newXattnRun[float64](k.o, in).backward(o, data[float64](in[4]))
	}
	return nil
}

// rowsK{lo, n}: x [R,H] -> rows lo..lo+n-1 of x, [n,H].
type rowsK struct {
	noGrad
	lo, n int
}

func (k rowsK) name() string { return fmt.Sprintf("Rows{%d,%d}", k.lo, k.n) }
func (rowsK) typ() hm.Type   { return fnType(ft(2), ft(2)) }
func (k rowsK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 || k.lo < 0 || k.n <= 0 || k.lo+k.n > in[0][0] {
		return nil, fmt.Errorf("model: %s: input has shape %v", k.name(), in[0])
	}
	return tensor.Shape{k.n, in[0][1]}, nil
}
func (k rowsK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	copyFrom(out, in[0], k.lo*in[0].Shape()[1])
	return nil
}

// xattnRun is one run of CrossAttention or its gradient on concrete tensors.
type xattnRun[T float] struct {
	q, k, v, mask     []T
	lq, lk, nh, h, dh int
	scale             T
}

func newXattnRun[T float](o CrossAttentionOptions, in []*tensor.Dense) *xattnRun[T] {
	h := in[0].Shape()[1]
	return &xattnRun[T]{q: data[T](in[0]), k: data[T](in[1]), v: data[T](in[2]), mask: data[T](in[3]),
		lq: o.Lq, lk: o.Lk, nh: o.Heads, h: h, dh: h / o.Heads, scale: T(o.Scale)}
}

// blocks calls f on every (b,h) block in parallel, with qr and kr the first elements of the
// block's query and memory rows, p the block's Lq×Lk attention weights and s an Lq×Lk scratch.
func (r *xattnRun[T]) blocks(f func(b, qr, kr int, s, p []T)) {
	lq, lk, nh, h, dh := r.lq, r.lk, r.nh, r.h, r.dh
	nb := len(r.q) / (lq * h)
	parallelFor(nb*nh, lq*lk*dh, func(lo, hi int) {
		buf := getScratch[T](2 * lq * lk)
		defer putScratch(buf)
		s, p := (*buf)[:lq*lk], (*buf)[lq*lk:]
		for bh := lo; bh < hi; bh++ {
			b, hd := bh/nh, bh%nh
			qr, kr := b*lq*h+hd*dh, b*lk*h+hd*dh
			gemm(false, true, lq, lk, dh, r.scale, r.q[qr:], h, r.k[kr:], h, 0, s, lk)
			softmaxRows(p, s, r.mask[b*lk:(b+1)*lk], lq, false)
			f(b, qr, kr, s, p)
		}
	})
}

// softmaxRows writes the masked softmax of the n rows of s (n×len(m)) into out, row i over
// keys 0..i only when causal: the AVX2 float32 row on a binary mask, else softmaxRow.
func softmaxRows[T float](out, s, m []T, n int, causal bool) {
	l := len(m)
	o32, fast := any(out).([]float32)
	binary, first := false, l
	var s32, m32 []float32
	if fast = fast && haveAVX2FMA; fast {
		s32, m32 = any(s).([]float32), any(m).([]float32)
		binary, first = maskKind(m32)
	}
	for i := 0; i < n; i++ {
		end := l
		if causal {
			end = i + 1
		}
		if fast && binary && first < end {
			softmaxRow32(o32[i*l:(i+1)*l], s32[i*l:(i+1)*l], m32, end)
			continue
		}
		softmaxRow(out[i*l:(i+1)*l], s[i*l:(i+1)*l], m, end)
	}
}

func (r *xattnRun[T]) forward(out []T) {
	r.blocks(func(_, qr, kr int, _, p []T) {
		gemm(false, false, r.lq, r.dh, r.lk, 1, p, r.lk, r.v[kr:], r.h, 0, out[qr:], r.h)
	})
}

// backward writes dq, dk, dv (rows 0..Nq-1, Nq..Nq+Nk-1, Nq+Nk.. of out) given g:
//
//	dv = pᵀ·g, dp = g·vᵀ, ds = p ⊙ (dp - Σ dp·p), dq = Scale·ds·k, dk = Scale·dsᵀ·q
//
// Blocks of one sequence and different heads write disjoint columns, so the parallel blocks
// never write the same element.
func (r *xattnRun[T]) backward(out, g []T) {
	lq, lk, h, dh := r.lq, r.lk, r.h, r.dh
	nq, nk := len(r.q), len(r.k)
	dq, dk, dv := out[:nq], out[nq:nq+nk], out[nq+nk:]
	r.blocks(func(_, qr, kr int, s, p []T) {
		gemm(true, false, lk, dh, lq, 1, p, lk, g[qr:], h, 0, dv[kr:], h)
		gemm(false, true, lq, lk, dh, 1, g[qr:], h, r.v[kr:], h, 0, s, lk)
		for i := 0; i < lq; i++ {
			softmaxGradRow(s[i*lk:(i+1)*lk], p[i*lk:(i+1)*lk], s[i*lk:(i+1)*lk])
		}
		gemm(false, false, lq, dh, lk, r.scale, s, lk, r.k[kr:], h, 0, dq[qr:], h)
		gemm(true, false, lk, dh, lq, r.scale, s, lk, r.q[qr:], h, 0, dk[kr:], h)
	})
}
