package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// AddLayerNorm is LayerNorm(x + r, gamma, beta, eps) in one op, the residual connection and
// normalisation of a post-LN Transformer block (BERT): x and r are [N,H], gamma and beta [H];
// the result is [N,H]. It computes Add then LayerNorm bit for bit, row by row, without holding
// the sum: the forward writes each row's sum into its output row and normalises it in place, and
// the gradient recomputes the row's sum from x and r. The gradient with respect to x and r is
// one tensor, that of LayerNorm with respect to the sum. Differentiable with respect to all four.
func AddLayerNorm(x, r, gamma, beta *gorgonia.Node, eps float64) (*gorgonia.Node, error) {
	return apply(addLNK{eps: eps}, x, r, gamma, beta)
}

// addLNK: (x, r, gamma, beta) -> LayerNorm(x + r).
type addLNK struct{ eps float64 }

func (k addLNK) name() string { return fmt.Sprintf("AddLayerNorm{%g}", k.eps) }
func (addLNK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(1), ft(1), ft(2)) }
func (addLNK) diff() []bool   { return []bool{true, true, true, true} }

// grads: the joint term is d(x+r); x and r both take it unchanged.
func (k addLNK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{args: []int{argJoint}},
		{args: []int{argJoint}},
		{k: addLNGradGammaK{eps: k.eps}, args: []int{0, 1, argGrad}},
		{k: colSumK{}, args: []int{argGrad}},
	}
}

func (k addLNK) jointGrad(in []tensor.Shape) *gradTerm {
	return &gradTerm{addLNGradXK{eps: k.eps}, []int{0, 1, 2, argGrad}}
}

func (k addLNK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if _, err := sameShape(k.name(), "x and residual", in, 0, 1); err != nil {
		return nil, err
	}
	for i := 2; i < 4; i++ {
		if err := wantVec(k.name(), i, in[i], in[0][1]); err != nil {
			return nil, err
		}
	}
	return in[0].Clone(), nil
}

func (k addLNK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		addLayerNorm(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), data[float32](in[3]), h, k.eps)
	case []float64:
		addLayerNorm(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), data[float64](in[3]), h, k.eps)
	}
	return nil
}

func addLayerNorm[T float](out, x, r, gamma, beta []T, h int, eps float64) {
	parallelFor(len(x)/h, h+layerNormCost[T](h), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			o := out[i*h : (i+1)*h]
			addRow(o, x[i*h:(i+1)*h], r[i*h:(i+1)*h])
			layerNormRow(o, o, gamma, beta, eps)
		}
	})
}

// addRow writes x + r into out, as Add does.
func addRow[T float](out, x, r []T) {
	for j := range out {
		out[j] = x[j] + r[j]
	}
}

// addLNGradXK: (x, r, gamma, g) -> the gradient of LayerNorm at x + r with respect to its
// input, row by row as lnGradXK.
type addLNGradXK struct {
	noGrad
	eps float64
}

func (k addLNGradXK) name() string { return fmt.Sprintf("AddLayerNormGradX{%g}", k.eps) }
func (addLNGradXK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(1), ft(2), ft(2)) }
func (k addLNGradXK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return sameShape(k.name(), "x, residual and gradient", in, 0, 1, 3)
}

func (k addLNGradXK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		addLayerNormGradX(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), data[float32](in[3]), h, k.eps)
	case []float64:
		addLayerNormGradX(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), data[float64](in[3]), h, k.eps)
	}
	return nil
}

// addLayerNormGradX writes each row's sum into out, then its gradient over it.
func addLayerNormGradX[T float](out, x, r, gamma, g []T, h int, eps float64) {
	parallelFor(len(x)/h, 13*h, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			o := out[i*h : (i+1)*h]
			addRow(o, x[i*h:(i+1)*h], r[i*h:(i+1)*h])
			layerNormGradXRow(o, o, gamma, g[i*h:(i+1)*h], eps)
		}
	})
}

// addLNGradGammaK: (x, r, g) -> dgamma = Σ_rows g * xhat(x + r), as lnGradGammaK on the sum.
type addLNGradGammaK struct {
	noGrad
	eps float64
}

func (k addLNGradGammaK) name() string { return fmt.Sprintf("AddLayerNormGradGamma{%g}", k.eps) }
func (addLNGradGammaK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(2), ft(1)) }
func (k addLNGradGammaK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if _, err := sameShape(k.name(), "x, residual and gradient", in); err != nil {
		return nil, err
	}
	return tensor.Shape{in[0][1]}, nil
}

func (k addLNGradGammaK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		addLayerNormGradGamma(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), h, k.eps)
	case []float64:
		addLayerNormGradGamma(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), h, k.eps)
	}
	return nil
}

// addLayerNormGradGamma is layerNormGradGamma on x + r: the row statistics of each sum (a row
// of scratch per worker), then the column sums in row order, each sum recomputed as it is read.
func addLayerNormGradGamma[T float](out, x, r, g []T, h int, eps float64) {
	rows := len(x) / h
	stats := make([]float64, 2*rows)
	parallelFor(rows, 5*h, func(lo, hi int) {
		s := make([]T, h)
		for i := lo; i < hi; i++ {
			addRow(s, x[i*h:(i+1)*h], r[i*h:(i+1)*h])
			stats[2*i], stats[2*i+1] = rowStats(s, eps)
		}
	})
	parallelFor(h, 4*rows, func(lo, hi int) {
		acc := make([]float64, hi-lo)
		for i := 0; i < rows; i++ {
			mean, rstd := stats[2*i], stats[2*i+1]
			gr, rr := g[i*h+lo:i*h+hi], r[i*h+lo:i*h+hi]
			for j, v := range x[i*h+lo : i*h+hi] {
				s := v + rr[j]
				acc[j] += float64(gr[j]) * (float64(s) - mean) * rstd
			}
		}
		for j, a := range acc {
			out[lo+j] = T(a)
		}
	})
}

// LinearGELU is GELU(x·wᵀ + b) in one op, the first half of a Transformer feed-forward
// sublayer: x is [N,In], w [Out,In], b [Out]; the result is [N,Out]. It computes Linear then
// GELU bit for bit, the GELU in place on the matrix product, so the pre-activation is never
// held: its gradient recomputes it (one more matrix product). That suits inference graphs,
// where it saves an [N,Out] tensor; a training graph that keeps Linear and GELU apart holds the
// pre-activation instead and spares the product. Differentiable with respect to all three.
func LinearGELU(x, w, b *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(linearGELUK{}, x, w, b)
}

// linearGELUK: (x, w, b) -> GELU(x·wᵀ + b).
type linearGELUK struct{}

func (linearGELUK) name() string { return "LinearGELU" }
func (linearGELUK) typ() hm.Type { return fnType(ft(2), ft(2), ft(1), ft(2)) }
func (linearGELUK) diff() []bool { return []bool{true, true, true} }

// grads: the joint term is the gradient with respect to the pre-activation, d; then as Linear's.
func (linearGELUK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: matMulK{}, args: []int{argJoint, 1}},         // dx = d·w
		{k: matMulK{tA: true}, args: []int{argJoint, 0}}, // dw = dᵀ·x
		{k: colSumK{}, args: []int{argJoint}},            // db = Σ_rows d
	}
}

func (linearGELUK) jointGrad(in []tensor.Shape) *gradTerm {
	return &gradTerm{linearGELUGradK{}, []int{0, 1, 2, argGrad}}
}

func (linearGELUK) shape(in []tensor.Shape) (tensor.Shape, error) { return linearK{}.shape(in) }

func (linearGELUK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	if err := (linearK{}).forward(in, out); err != nil {
		return err
	}
	switch o := out.Data().(type) {
	case []float32:
		gelu(o, o)
	case []float64:
		gelu(o, o)
	}
	return nil
}

// linearGELUGradK: (x, w, b, g) -> g * GELU'(x·wᵀ + b), the pre-activation recomputed into the
// output and replaced by the gradient in place.
type linearGELUGradK struct{ noGrad }

func (linearGELUGradK) name() string { return "LinearGELUGrad" }
func (linearGELUGradK) typ() hm.Type { return fnType(ft(2), ft(2), ft(1), ft(2), ft(2)) }
func (k linearGELUGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	s, err := linearK{}.shape(in[:3])
	if err != nil {
		return nil, err
	}
	if !in[3].Eq(s) {
		return nil, fmt.Errorf("model: %s: gradient %v, want %v", k.name(), in[3], s)
	}
	return s, nil
}

func (linearGELUGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	if err := (linearK{}).forward(in[:3], out); err != nil {
		return err
	}
	switch o := out.Data().(type) {
	case []float32:
		geluGrad(o, o, data[float32](in[3]))
	case []float64:
		geluGrad(o, o, data[float64](in[3]))
	}
	return nil
}
