package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// RNG is the random source of dropout masks. Graphs hold a pointer to it and
// read R at every run, so replacing R (BiEncoder.SetRNG) reseeds the masks of
// graphs already built. Masks are drawn in the graph's execution order, which
// is fixed for a graph, so a run is reproducible from the state of R.
type RNG struct {
	R *rand.Rand
}

// Dropout applies inverted dropout (Srivastava et al., 2014): each element is
// zeroed with probability p and the others are scaled by 1/(1-p), so the
// expected value is unchanged. The mask is drawn from rng.R at every run.
// With p == 0 it returns x itself. Use it only in training graphs.
func Dropout(x *gorgonia.Node, p float64, rng *RNG) (*gorgonia.Node, error) {
	if p == 0 {
		return x, nil
	}
	if !(p > 0 && p < 1) {
		return nil, fmt.Errorf("model: dropout probability %g outside [0,1)", p)
	}
	if rng == nil {
		return nil, fmt.Errorf("model: dropout needs a random source")
	}
	mask, err := gorgonia.ApplyOp(newRandomOp(dropMaskK{p: p, rng: rng}), x)
	if err != nil {
		return nil, fmt.Errorf("model: dropout mask: %w", err)
	}
	return apply(applyMaskK{}, x, mask)
}

// dropMaskK draws a mask shaped like its input: 0 with probability p, else
// 1/(1-p). Each draw uses 32 random bits.
type dropMaskK struct {
	p   float64
	rng *RNG
}

func (k dropMaskK) name() string                      { return fmt.Sprintf("DropoutMask{%g}", k.p) }
func (dropMaskK) arity() int                          { return 1 }
func (dropMaskK) typ() hm.Type                        { return fnType(tvA, tvA) }
func (dropMaskK) diff() []bool                        { return []bool{false} }
func (dropMaskK) grads(in []tensor.Shape) []*gradTerm { return nil }
func (dropMaskK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}

func (k dropMaskK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	if k.rng == nil || k.rng.R == nil {
		return fmt.Errorf("model: %s: no random source set", k.name())
	}
	threshold := uint32(math.Min(k.p*(1<<32), math.MaxUint32))
	switch o := out.Data().(type) {
	case []float32:
		dropMask(o, k.rng.R, threshold, float32(1/(1-k.p)))
	case []float64:
		dropMask(o, k.rng.R, threshold, 1/(1-k.p))
	}
	return nil
}

func dropMask[T float](out []T, r *rand.Rand, threshold uint32, keep T) {
	for i := 0; i < len(out); i += 2 {
		u := r.Uint64()
		out[i] = keep
		if uint32(u) < threshold {
			out[i] = 0
		}
		if i+1 < len(out) {
			out[i+1] = keep
			if uint32(u>>32) < threshold {
				out[i+1] = 0
			}
		}
	}
}

// applyMaskK: (x, m) -> x ⊙ m, differentiable with respect to x only.
type applyMaskK struct{}

func (applyMaskK) name() string { return "ApplyMask" }
func (applyMaskK) arity() int   { return 2 }
func (applyMaskK) typ() hm.Type { return fnType(tvA, tvA, tvA) }
func (applyMaskK) diff() []bool { return []bool{true, false} }
func (applyMaskK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: applyMaskK{}, args: []int{argGrad, 1}}, nil}
}
func (k applyMaskK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("model: %s: shapes %v and %v differ", k.name(), in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (applyMaskK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		mul(o, data[float32](in[0]), data[float32](in[1]))
	case []float64:
		mul(o, data[float64](in[0]), data[float64](in[1]))
	}
	return nil
}

func mul[T float](out, x, y []T) {
	for i := range out {
		out[i] = x[i] * y[i]
	}
}
