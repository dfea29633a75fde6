package model

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Multi-head attention works on [N,H] matrices (N = B*L rows, sequence b at
// rows b*L..b*L+L-1; head h at columns h*dh..h*dh+dh-1, dh = H/heads) and on
// score tensors [B,heads,L,L]. The heads are never copied out: each (b,h)
// block is a strided sub-matrix handed to BLAS.

// AttentionScores computes scaled dot-product scores per head (Vaswani et al.,
// 2017, eq. 1): s[b,h,i,j] = scale * q_bh[i]·k_bh[j]. q and k are [B*L,H];
// the result is [B,heads,L,L].
func AttentionScores(q, k *gorgonia.Node, L, heads int, scale float64) (*gorgonia.Node, error) {
	return apply(headMMK{mode: modeNT, l: L, heads: heads, scale: scale}, q, k)
}

// AttentionContext applies attention weights per head: out_bh = p[b,h]·v_bh.
// p is [B,heads,L,L], v is [B*L,H]; the result is [B*L,H].
func AttentionContext(p, v *gorgonia.Node, L, heads int) (*gorgonia.Node, error) {
	return apply(headMMK{mode: modeNN, l: L, heads: heads, scale: 1}, p, v)
}

type headMode int

const (
	modeNT headMode = iota // (x [N,H], y [N,H]) -> s·x_bh·y_bhᵀ  [B,heads,L,L]
	modeNN                 // (a [B,heads,L,L], y [N,H]) -> s·a_bh·y_bh  [N,H]
	modeTN                 // (a [B,heads,L,L], y [N,H]) -> s·a_bhᵀ·y_bh [N,H]
)

type headMMK struct {
	mode     headMode
	l, heads int
	scale    float64
}

func (k headMMK) name() string {
	return fmt.Sprintf("HeadMatMul{%d,L=%d,heads=%d,%g}", k.mode, k.l, k.heads, k.scale)
}
func (k headMMK) typ() hm.Type {
	if k.mode == modeNT {
		return fnType(ft(2), ft(2), ft(4))
	}
	return fnType(ft(4), ft(2), ft(2))
}
func (headMMK) diff() []bool { return []bool{true, true} }

// grads, per (b,h) block with G the output gradient:
//
//	NT: out = s·X·Yᵀ  dX = s·G·Y (NN)   dY = s·Gᵀ·X (TN)
//	NN: out = s·A·Y   dA = s·G·Yᵀ (NT)  dY = s·Aᵀ·G (TN)
//	TN: out = s·Aᵀ·Y  dA = s·Y·Gᵀ (NT)  dY = s·A·G  (NN)
func (k headMMK) grads(in []tensor.Shape) []*gradTerm {
	with := func(m headMode) headMMK { k2 := k; k2.mode = m; return k2 }
	switch k.mode {
	case modeNT:
		return []*gradTerm{{with(modeNN), []int{argGrad, 1}}, {with(modeTN), []int{argGrad, 0}}}
	case modeNN:
		return []*gradTerm{{with(modeNT), []int{argGrad, 1}}, {with(modeTN), []int{0, argGrad}}}
	default:
		return []*gradTerm{{with(modeNT), []int{1, argGrad}}, {with(modeNN), []int{0, argGrad}}}
	}
}

func (k headMMK) checkRows(i int, s tensor.Shape) error {
	if err := want2D(k.name(), i, s); err != nil {
		return err
	}
	if k.l <= 0 || k.heads <= 0 || s[0]%k.l != 0 || s[1]%k.heads != 0 {
		return fmt.Errorf("model: %s: input %d has shape %v, want [B*%d, heads*dh] with %d heads", k.name(), i, s, k.l, k.heads)
	}
	return nil
}

func (k headMMK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if k.mode == modeNT {
		for i := 0; i < 2; i++ {
			if err := k.checkRows(i, in[i]); err != nil {
				return nil, err
			}
		}
		if _, err := sameShape(k.name(), "the inputs", in); err != nil {
			return nil, err
		}
		return tensor.Shape{in[0][0] / k.l, k.heads, k.l, k.l}, nil
	}
	if err := k.checkRows(1, in[1]); err != nil {
		return nil, err
	}
	want := tensor.Shape{in[1][0] / k.l, k.heads, k.l, k.l}
	if !in[0].Eq(want) {
		return nil, fmt.Errorf("model: %s: weights have shape %v, want %v", k.name(), in[0], want)
	}
	return in[1].Clone(), nil
}

func (k headMMK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		headMatMul(k, o, data[float32](in[0]), data[float32](in[1]), in[1].Shape()[1])
	case []float64:
		headMatMul(k, o, data[float64](in[0]), data[float64](in[1]), in[1].Shape()[1])
	}
	return nil
}

func headMatMul[T float](k headMMK, out, a, y []T, h int) {
	l, nh := k.l, k.heads
	dh := h / nh
	nb := len(y) / (l * h)
	s := T(k.scale)
	parallelFor(nb*nh, l*l*dh, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			b, hd := bh/nh, bh%nh
			rows := b*l*h + hd*dh // first element of the (b,h) block of an [N,H] matrix
			blk := bh * l * l     // first element of the (b,h) block of a score tensor
			switch k.mode {
			case modeNT:
				gemm(false, true, l, l, dh, s, a[rows:], h, y[rows:], h, 0, out[blk:], l)
			case modeNN:
				gemm(false, false, l, dh, l, s, a[blk:], l, y[rows:], h, 0, out[rows:], h)
			case modeTN:
				gemm(true, false, l, dh, l, s, a[blk:], l, y[rows:], h, 0, out[rows:], h)
			}
		}
	})
}

// MaskedSoftmax turns attention scores into weights: a softmax over the last
// axis of s [B,heads,L,L] restricted to the keys j with mask[b,j] != 0 (and
// j <= i when causal). Excluded keys get weight exactly 0, as with a score of
// -inf; a row with no allowed key is all zeros. mask is [B,L]. Differentiable
// with respect to s only.
func MaskedSoftmax(s, mask *gorgonia.Node, causal bool) (*gorgonia.Node, error) {
	return apply(maskedSoftmaxK{causal: causal}, s, mask)
}

type maskedSoftmaxK struct{ causal bool }

func (k maskedSoftmaxK) name() string { return fmt.Sprintf("MaskedSoftmax{causal=%t}", k.causal) }
func (maskedSoftmaxK) typ() hm.Type   { return fnType(ft(4), ft(2), ft(4)) }
func (maskedSoftmaxK) diff() []bool   { return []bool{true, false} }
func (maskedSoftmaxK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: softmaxGradK{}, args: []int{argOut, argGrad}}, nil}
}

func (k maskedSoftmaxK) shape(in []tensor.Shape) (tensor.Shape, error) {
	s, m := in[0], in[1]
	if len(s) != 4 || s[2] != s[3] || len(m) != 2 || m[0] != s[0] || m[1] != s[3] {
		return nil, fmt.Errorf("model: %s: scores %v and mask %v, want [B,heads,L,L] and [B,L]", k.name(), s, m)
	}
	return s.Clone(), nil
}

func (k maskedSoftmaxK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	sh := in[0].Shape()
	switch o := out.Data().(type) {
	case []float32:
		maskedSoftmax(o, data[float32](in[0]), data[float32](in[1]), sh[1], sh[2], k.causal)
	case []float64:
		maskedSoftmax(o, data[float64](in[0]), data[float64](in[1]), sh[1], sh[2], k.causal)
	}
	return nil
}

func maskedSoftmax[T float](out, s, mask []T, nh, l int, causal bool) {
	if o32, ok := any(out).([]float32); ok && haveAVX2FMA {
		maskedSoftmax32(o32, any(s).([]float32), any(mask).([]float32), nh, l, causal)
		return
	}
	rows := len(s) / l
	parallelFor(rows, 4*l, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			b, i := r/(nh*l), r%l
			end := l
			if causal {
				end = i + 1
			}
			softmaxRow(out[r*l:(r+1)*l], s[r*l:(r+1)*l], mask[b*l:(b+1)*l], end)
		}
	})
}

// softmaxRow writes the softmax of s[:end] over the keys j with m[j] != 0
// into out[:end], accumulating in float64, and zeros the rest of out.
func softmaxRow[T float](out, s, m []T, end int) {
	mx := math.Inf(-1)
	for j := 0; j < end; j++ {
		if m[j] != 0 && float64(s[j]) > mx {
			mx = float64(s[j])
		}
	}
	clear(out)
	if math.IsInf(mx, -1) {
		return
	}
	var sum float64
	for j := 0; j < end; j++ {
		if m[j] != 0 {
			e := expLE0[T](float64(s[j]) - mx)
			out[j] = T(e)
			sum += e
		}
	}
	inv := T(1 / sum)
	for j := 0; j < end; j++ {
		out[j] *= inv
	}
}

// maskedSoftmax32 is maskedSoftmax in float32 with the maximum and the
// exponentials in AVX2 (softmaxRow32), for sequences whose mask holds only
// 0 and 1 (the inputs' masks); other sequences take softmaxRow.
func maskedSoftmax32(out, s, mask []float32, nh, l int, causal bool) {
	rows := len(s) / l
	parallelFor(rows, 4*l, func(lo, hi int) {
		seq, binary, first := -1, false, 0
		for r := lo; r < hi; r++ {
			b, i := r/(nh*l), r%l
			if b != seq {
				seq = b
				binary, first = maskKind(mask[b*l : (b+1)*l])
			}
			end := l
			if causal {
				end = i + 1
			}
			if !binary || first >= end {
				softmaxRow(out[r*l:(r+1)*l], s[r*l:(r+1)*l], mask[b*l:(b+1)*l], end)
				continue
			}
			softmaxRow32(out[r*l:(r+1)*l], s[r*l:(r+1)*l], mask[b*l:(b+1)*l], end)
		}
	})
}

// maskKind says whether a sequence's mask m holds only 0 and 1, and which
// key is the first with a nonzero mask (len(m) when none).
func maskKind[T float](m []T) (binary bool, first int) {
	binary, first = true, len(m)
	for j, v := range m {
		if v != 0 && first == len(m) {
			first = j
		}
		binary = binary && (v == 0 || v == 1)
	}
	return binary, first
}

// softmaxRow32 is softmaxRow in float32 with the maximum and the
// exponentials in AVX2 (maskedMaxVec, softmaxExpVec), for a binary mask m
// with a nonzero key before end.
func softmaxRow32(out, s, m []float32, end int) {
	m, sr := m[:end], s[:end]
	n, mx := maskedMaxVec(sr, m)
	for j := n; j < end; j++ {
		if m[j] != 0 && sr[j] > mx {
			mx = sr[j]
		}
	}
	clear(out[end:])
	n, sum := softmaxExpVec(out[:end], sr, m, mx)
	for j := n; j < end; j++ {
		var e float32
		if m[j] != 0 {
			e = float32(expNeg32(float64(sr[j] - mx)))
		}
		out[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := range out[:end] {
		out[j] *= inv
	}
}

// softmaxGradK: (p, g) -> p ⊙ (g - Σ_j g·p) over the last axis, the
// gradient of a softmax given its output p.
type softmaxGradK struct{ noGrad }

func (softmaxGradK) name() string { return "SoftmaxGrad" }
func (softmaxGradK) typ() hm.Type { return fnType(tvA, tvA, tvA) }
func (k softmaxGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) || len(in[0]) == 0 {
		return nil, fmt.Errorf("model: %s: output %v and gradient %v differ", k.name(), in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (softmaxGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	sh := in[0].Shape()
	l := sh[len(sh)-1]
	switch o := out.Data().(type) {
	case []float32:
		softmaxGrad(o, data[float32](in[0]), data[float32](in[1]), l)
	case []float64:
		softmaxGrad(o, data[float64](in[0]), data[float64](in[1]), l)
	}
	return nil
}

func softmaxGrad[T float](out, p, g []T, l int) {
	parallelFor(len(p)/l, 4*l, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			softmaxGradRow(out[r*l:(r+1)*l], p[r*l:(r+1)*l], g[r*l:(r+1)*l])
		}
	})
}

// softmaxGradRow sets out = p ⊙ (g - Σ_j g·p) on one row, the sum in
// float64; out may be g.
func softmaxGradRow[T float](out, p, g []T) {
	var dot float64
	for j := range p {
		dot += float64(p[j]) * float64(g[j])
	}
	d := T(dot)
	for j := range p {
		out[j] = p[j] * (g[j] - d)
	}
}

// expLE0 is e^x for x <= 0: math.Exp for float64, the faster expNeg32
// (float32 accuracy) for float32.
func expLE0[T float](x float64) float64 {
	var z T
	if _, ok := any(z).(float32); ok {
		return expNeg32(x)
	}
	return math.Exp(x)
}
