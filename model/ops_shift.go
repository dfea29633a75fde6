package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ShiftRows moves the rows of every length-L sequence of x [B·L,H] by s positions, filling
// with zeros:
//
//	out[b·L+i] = x[b·L+i+s]  if 0 <= i+s < L, else 0
//
// s > 0 moves rows up (earlier), s < 0 down. Its gradient is ShiftRows(g, L, -s). RETRO's
// chunked cross-attention (retro.go) uses it to line the attending chunks up with the chunks
// whose neighbours they read (s = m-1) and to move the result back (s = 1-m).
func ShiftRows(x *gorgonia.Node, L, s int) (*gorgonia.Node, error) {
	return apply(shiftK{l: L, s: s}, x)
}

type shiftK struct{ l, s int }

func (k shiftK) name() string { return fmt.Sprintf("ShiftRows{L=%d,s=%d}", k.l, k.s) }
func (shiftK) typ() hm.Type   { return fnType(ft(2), ft(2)) }
func (shiftK) diff() []bool   { return []bool{true} }
func (k shiftK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: shiftK{l: k.l, s: -k.s}, args: []int{argGrad}}}
}
func (k shiftK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if k.l <= 0 || in[0][0]%k.l != 0 {
		return nil, fmt.Errorf("model: %s: %d rows do not split into sequences of length %d", k.name(), in[0][0], k.l)
	}
	return in[0].Clone(), nil
}
func (k shiftK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		shiftRows(o, data[float32](in[0]), k.l, k.s, in[0].Shape()[1])
	case []float64:
		shiftRows(o, data[float64](in[0]), k.l, k.s, in[0].Shape()[1])
	}
	return nil
}

func shiftRows[T float](out, x []T, l, s, h int) {
	for r := 0; r < len(out)/h; r++ {
		o := out[r*h : (r+1)*h]
		if i := r%l + s; i >= 0 && i < l {
			copy(o, x[(r+s)*h:(r+s+1)*h])
		} else {
			clear(o)
		}
	}
}
