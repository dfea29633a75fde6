package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// MeanPool averages the token vectors of each sequence over its real tokens:
//
//	out[b] = Σ_l mask[b,l]·x[b*L+l] / Σ_l mask[b,l]
//
// x is [B*L,H], mask is [B,L] (1 real token, 0 padding); the result is
// [B,H]. A sequence without real tokens pools to zeros. Differentiable with
// respect to x.
func MeanPool(x, mask *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(meanPoolK{}, x, mask)
}

type meanPoolK struct{}

func (meanPoolK) name() string { return "MeanPool" }
func (meanPoolK) typ() hm.Type { return fnType(ft(2), ft(2), ft(2)) }
func (meanPoolK) diff() []bool { return []bool{true, false} }
func (meanPoolK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: meanPoolGradK{}, args: []int{1, argGrad}}, nil}
}

func (k meanPoolK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if err := want2D(k.name(), 1, in[1]); err != nil {
		return nil, err
	}
	if in[1][0]*in[1][1] != in[0][0] {
		return nil, fmt.Errorf("model: %s: x %v does not hold the %v tokens of the mask", k.name(), in[0], in[1])
	}
	return tensor.Shape{in[1][0], in[0][1]}, nil
}

func (meanPoolK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		meanPool(o, data[float32](in[0]), data[float32](in[1]), h)
	case []float64:
		meanPool(o, data[float64](in[0]), data[float64](in[1]), h)
	}
	return nil
}

func meanPool[T float](out, x, mask []T, h int) {
	b := len(out) / h
	l := len(mask) / b
	clear(out)
	for i := 0; i < b; i++ {
		o := out[i*h : (i+1)*h]
		var cnt T
		for t := 0; t < l; t++ {
			m := mask[i*l+t]
			if m == 0 {
				continue
			}
			cnt += m
			xr := x[(i*l+t)*h : (i*l+t+1)*h]
			for j := range o {
				o[j] += m * xr[j]
			}
		}
		if cnt != 0 {
			inv := 1 / cnt
			for j := range o {
				o[j] *= inv
			}
		}
	}
}

// meanPoolGradK: (mask [B,L], g [B,H]) -> [B*L,H], row b*L+l being
// mask[b,l]/count_b · g[b].
type meanPoolGradK struct{ noGrad }

func (meanPoolGradK) name() string { return "MeanPoolGrad" }
func (meanPoolGradK) typ() hm.Type { return fnType(ft(2), ft(2), ft(2)) }
func (k meanPoolGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 || len(in[1]) != 2 || in[0][0] != in[1][0] {
		return nil, fmt.Errorf("model: %s: mask %v and gradient %v", k.name(), in[0], in[1])
	}
	return tensor.Shape{in[0][0] * in[0][1], in[1][1]}, nil
}
func (meanPoolGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[1].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		meanPoolGrad(o, data[float32](in[0]), data[float32](in[1]), h)
	case []float64:
		meanPoolGrad(o, data[float64](in[0]), data[float64](in[1]), h)
	}
	return nil
}

func meanPoolGrad[T float](out, mask, g []T, h int) {
	b := len(g) / h
	l := len(mask) / b
	for i := 0; i < b; i++ {
		var cnt T
		for t := 0; t < l; t++ {
			cnt += mask[i*l+t]
		}
		gr := g[i*h : (i+1)*h]
		for t := 0; t < l; t++ {
			o := out[(i*l+t)*h : (i*l+t+1)*h]
			m := mask[i*l+t]
			if m == 0 || cnt == 0 {
				clear(o)
				continue
			}
			w := m / cnt
			for j := range o {
				o[j] = w * gr[j]
			}
		}
	}
}

// FirstToken takes the first token of each sequence (BERT's [CLS] pooling):
// out[b] = x[b*L]. x is [B*L,H]; the result is [B,H]. Differentiable.
func FirstToken(x *gorgonia.Node, L int) (*gorgonia.Node, error) {
	return apply(firstTokenK{l: L}, x)
}

type firstTokenK struct{ l int }

func (k firstTokenK) name() string { return fmt.Sprintf("FirstToken{L=%d}", k.l) }
func (firstTokenK) typ() hm.Type   { return fnType(ft(2), ft(2)) }
func (firstTokenK) diff() []bool   { return []bool{true} }
func (k firstTokenK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: firstTokenGradK{l: k.l}, args: []int{argGrad}}}
}
func (k firstTokenK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if k.l <= 0 || in[0][0]%k.l != 0 {
		return nil, fmt.Errorf("model: %s: %v does not split into sequences of length %d", k.name(), in[0], k.l)
	}
	return tensor.Shape{in[0][0] / k.l, in[0][1]}, nil
}
func (k firstTokenK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		firstToken(o, data[float32](in[0]), k.l, h)
	case []float64:
		firstToken(o, data[float64](in[0]), k.l, h)
	}
	return nil
}

func firstToken[T float](out, x []T, l, h int) {
	for b := 0; b*h < len(out); b++ {
		copy(out[b*h:(b+1)*h], x[b*l*h:(b*l+1)*h])
	}
}

// firstTokenGradK: g [B,H] -> [B*L,H], zero except rows b*L = g[b].
type firstTokenGradK struct {
	noGrad
	l int
}

func (k firstTokenGradK) name() string { return fmt.Sprintf("FirstTokenGrad{L=%d}", k.l) }
func (firstTokenGradK) typ() hm.Type   { return fnType(ft(2), ft(2)) }
func (k firstTokenGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	return tensor.Shape{in[0][0] * k.l, in[0][1]}, nil
}
func (k firstTokenGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		firstTokenGrad(o, data[float32](in[0]), k.l, h)
	case []float64:
		firstTokenGrad(o, data[float64](in[0]), k.l, h)
	}
	return nil
}

func firstTokenGrad[T float](out, g []T, l, h int) {
	clear(out)
	for b := 0; b*h < len(g); b++ {
		copy(out[b*l*h:(b*l+1)*h], g[b*h:(b+1)*h])
	}
}
