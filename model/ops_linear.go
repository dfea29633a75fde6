package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Linear is the affine map of PyTorch's nn.Linear: out = x·wᵀ + b.
//
// x is [N,In], w is [Out,In] (the PyTorch and Hugging Face layout), b is
// [Out]; the result is [N,Out]. Differentiable with respect to all three.
func Linear(x, w, b *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(linearK{}, x, w, b)
}

type linearK struct{}

func (linearK) name() string { return "Linear" }
func (linearK) typ() hm.Type { return fnType(ft(2), ft(2), ft(1), ft(2)) }
func (linearK) diff() []bool { return []bool{true, true, true} }
func (linearK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: matMulK{}, args: []int{argGrad, 1}},         // dx = g·w
		{k: matMulK{tA: true}, args: []int{argGrad, 0}}, // dw = gᵀ·x
		{k: colSumK{}, args: []int{argGrad}},            // db = Σ_rows g
	}
}

func (k linearK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if err := want2D(k.name(), 1, in[1]); err != nil {
		return nil, err
	}
	if in[1][1] != in[0][1] {
		return nil, fmt.Errorf("model: %s: input %v does not fit weight %v ([out,in])", k.name(), in[0], in[1])
	}
	if err := wantVec(k.name(), 2, in[2], in[1][0]); err != nil {
		return nil, err
	}
	return tensor.Shape{in[0][0], in[1][0]}, nil
}

func (linearK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	n, din := in[0].Shape()[0], in[0].Shape()[1]
	dout := in[1].Shape()[0]
	defer countGEMM(n, dout, din)()
	switch o := out.Data().(type) {
	case []float32:
		linear(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), n, din, dout)
	case []float64:
		linear(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), n, din, dout)
	}
	return nil
}

func linear[T float](out, x, w, b []T, n, din, dout int) {
	if o32, ok := any(out).([]float32); ok {
		sgemmBias(false, true, n, dout, din, any(x).([]float32), din, any(w).([]float32), din, any(b).([]float32), o32, dout)
		return
	}
	for i := 0; i < n; i++ {
		copy(out[i*dout:(i+1)*dout], b)
	}
	gemm(false, true, n, dout, din, 1, x, din, w, din, 1, out, dout)
}

// MatMul multiplies matrices: out = op(a)·op(b), where op transposes when
// the flag is set. With op(a) [M,K] and op(b) [K,N] the result is [M,N].
// Differentiable with respect to both inputs.
func MatMul(a, b *gorgonia.Node, transA, transB bool) (*gorgonia.Node, error) {
	return apply(matMulK{tA: transA, tB: transB}, a, b)
}

type matMulK struct{ tA, tB bool }

func (k matMulK) name() string { return fmt.Sprintf("MatMul{%t,%t}", k.tA, k.tB) }
func (matMulK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(2)) }
func (matMulK) diff() []bool   { return []bool{true, true} }

// grads: with C = op(A)·op(B) and G = dC,
//
//	NN: dA = G·Bᵀ   dB = Aᵀ·G
//	NT: dA = G·B    dB = Gᵀ·A
//	TN: dA = B·Gᵀ   dB = A·G
//	TT: dA = Bᵀ·Gᵀ  dB = Gᵀ·Aᵀ
func (k matMulK) grads(in []tensor.Shape) []*gradTerm {
	switch {
	case !k.tA && !k.tB:
		return []*gradTerm{{matMulK{false, true}, []int{argGrad, 1}}, {matMulK{true, false}, []int{0, argGrad}}}
	case !k.tA && k.tB:
		return []*gradTerm{{matMulK{false, false}, []int{argGrad, 1}}, {matMulK{true, false}, []int{argGrad, 0}}}
	case k.tA && !k.tB:
		return []*gradTerm{{matMulK{false, true}, []int{1, argGrad}}, {matMulK{false, false}, []int{0, argGrad}}}
	default:
		return []*gradTerm{{matMulK{true, true}, []int{1, argGrad}}, {matMulK{true, true}, []int{argGrad, 0}}}
	}
}

func (k matMulK) dims(a, b tensor.Shape) (m, n, kk int) {
	m, kk = a[0], a[1]
	if k.tA {
		m, kk = kk, m
	}
	n = b[1]
	if k.tB {
		n = b[0]
	}
	return m, n, kk
}

func (k matMulK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if err := want2D(k.name(), 1, in[1]); err != nil {
		return nil, err
	}
	m, n, kk := k.dims(in[0], in[1])
	kb := in[1][0]
	if k.tB {
		kb = in[1][1]
	}
	if kk != kb {
		return nil, fmt.Errorf("model: %s: shapes %v and %v do not multiply", k.name(), in[0], in[1])
	}
	return tensor.Shape{m, n}, nil
}

func (k matMulK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	a, b := in[0].Shape(), in[1].Shape()
	m, n, kk := k.dims(a, b)
	defer countGEMM(m, n, kk)()
	switch o := out.Data().(type) {
	case []float32:
		gemm(k.tA, k.tB, m, n, kk, 1, data[float32](in[0]), a[1], data[float32](in[1]), b[1], 0, o, n)
	case []float64:
		gemm(k.tA, k.tB, m, n, kk, 1, data[float64](in[0]), a[1], data[float64](in[1]), b[1], 0, o, n)
	}
	return nil
}

// colSumK sums the rows of a matrix: [N,H] -> [H]. Used as a gradient only.
type colSumK struct{ noGrad }

func (colSumK) name() string { return "ColSum" }
func (colSumK) typ() hm.Type { return fnType(ft(2), ft(1)) }

func (k colSumK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	return tensor.Shape{in[0][1]}, nil
}

func (colSumK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		colSum(o, data[float32](in[0]), h)
	case []float64:
		colSum(o, data[float64](in[0]), h)
	}
	return nil
}

// colSum sums the rows of x [N,h] into out [h]. Workers split the columns, so
// every column is summed in row order whatever their number.
func colSum[T float](out, x []T, h int) {
	rows := len(x) / h
	parallelFor(h, rows, func(lo, hi int) {
		o := out[lo:hi]
		clear(o)
		for i := 0; i < rows; i++ {
			addInto(o, x[i*h+lo:i*h+hi])
		}
	})
}

// Add adds two tensors of the same shape (residual connections). The
// gradient passes unchanged to both inputs.
func Add(x, y *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(addK{}, x, y)
}

type addK struct{}

func (addK) name() string { return "Add" }
func (addK) typ() hm.Type { return fnType(tvA, tvA, tvA) }
func (addK) diff() []bool { return []bool{true, true} }
func (addK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{}, {}}
}

func (k addK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return sameShape(k.name(), "the inputs", in)
}

func (addK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	return forward2(out, in, add[float32], add[float64])
}

func add[T float](out, x, y []T) {
	parallelFor(len(out), 1, func(lo, hi int) {
		o, a, b := out[lo:hi], x[lo:hi], y[lo:hi]
		for i := range o {
			o[i] = a[i] + b[i]
		}
	})
}
