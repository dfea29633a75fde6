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
// is fixed for a graph, so a run is reproducible from the state of R (each
// dropout op takes one Uint64 from R per run).
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
	if err := checkDropout(p, rng); err != nil {
		return nil, err
	}
	return dropoutSeeded(x, dropMaskK{p: p, rng: rng})
}

func checkDropout(p float64, rng *RNG) error {
	if !(p > 0 && p < 1) {
		return fmt.Errorf("model: dropout probability %g outside [0,1)", p)
	}
	if rng == nil {
		return fmt.Errorf("model: dropout needs a random source")
	}
	return nil
}

// dropoutSeeded is Dropout with the mask kernel k (which may record or replay its seed).
func dropoutSeeded(x *gorgonia.Node, k dropMaskK) (*gorgonia.Node, error) {
	mask, err := gorgonia.ApplyOp(newRandomOp(k), x)
	if err != nil {
		return nil, fmt.Errorf("model: dropout mask: %w", err)
	}
	return apply(applyMaskK{}, x, mask)
}

// dropMaskK draws a mask shaped like its input: 0 with probability p, else
// 1/(1-p). Each run takes one 64-bit seed from the RNG; element pairs are
// then drawn from SplitMix64 (Steele et al., 2014) as a counter-based
// generator, so the mask is the same whatever the number of threads. With slot set, the seed
// drawn is also written to slot (record), or, with replay, read from slot instead of drawn: the
// recomputation of a checkpointed block (LlamaCheckpointed) draws its block's masks again.
type dropMaskK struct {
	noGrad
	p      float64
	rng    *RNG
	slot   *uint64
	replay bool
}

func (k dropMaskK) name() string {
	if k.replay {
		return fmt.Sprintf("DropoutMaskReplay{%g}", k.p)
	}
	return fmt.Sprintf("DropoutMask{%g}", k.p)
}
func (dropMaskK) typ() hm.Type { return fnType(tvA, tvA) }
func (dropMaskK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}

func (k dropMaskK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	var seed uint64
	switch {
	case k.replay:
		seed = *k.slot
	case k.rng == nil || k.rng.R == nil:
		return fmt.Errorf("model: %s: no random source set", k.name())
	default:
		seed = k.rng.R.Uint64()
		if k.slot != nil {
			*k.slot = seed
		}
	}
	threshold := dropThreshold(k.p)
	switch o := out.Data().(type) {
	case []float32:
		dropMask(o, seed, threshold, float32(1/(1-k.p)))
	case []float64:
		dropMask(o, seed, threshold, 1/(1-k.p))
	}
	return nil
}

// dropThreshold is the threshold of dropMask for probability p: an element
// is dropped when its 32 random bits are below it.
func dropThreshold(p float64) uint32 { return uint32(math.Min(p*(1<<32), math.MaxUint32)) }

// splitMix64 is the i-th output of the SplitMix64 generator seeded with seed.
func splitMix64(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func dropMask[T float](out []T, seed uint64, threshold uint32, keep T) {
	pairs := (len(out) + 1) / 2
	parallelFor(pairs, 8, func(lo, hi int) {
		dropMaskAt(out[2*lo:min(2*hi, len(out))], 2*lo, seed, threshold, keep)
	})
}

// dropMaskAt writes elements start..start+len(out)-1 of the mask that
// dropMask draws from seed into out: element 2i is 0 when the low half of
// the i-th SplitMix64 output is below threshold, element 2i+1 when its high
// half is, and the others are keep.
func dropMaskAt[T float](out []T, start int, seed uint64, threshold uint32, keep T) {
	drop := func(u uint32) T {
		if u < threshold {
			return 0
		}
		return keep
	}
	i := 0
	if start%2 == 1 && len(out) > 0 {
		out[0] = drop(uint32(splitMix64(seed, uint64(start/2)) >> 32))
		i = 1
	}
	for ; i+1 < len(out); i += 2 {
		u := splitMix64(seed, uint64((start+i)/2))
		out[i], out[i+1] = drop(uint32(u)), drop(uint32(u>>32))
	}
	if i < len(out) {
		out[i] = drop(uint32(splitMix64(seed, uint64((start+i)/2))))
	}
}

// applyMaskK: (x, m) -> x ⊙ m, differentiable with respect to x only.
type applyMaskK struct{}

func (applyMaskK) name() string { return "ApplyMask" }
func (applyMaskK) typ() hm.Type { return fnType(tvA, tvA, tvA) }
func (applyMaskK) diff() []bool { return []bool{true, false} }
func (applyMaskK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: applyMaskK{}, args: []int{argGrad, 1}}, nil}
}
func (k applyMaskK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return sameShape(k.name(), "x and mask", in)
}
func (applyMaskK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	return forward2(out, in, mul[float32], mul[float64])
}

func mul[T float](out, x, y []T) {
	parallelFor(len(out), 1, func(lo, hi int) {
		mulRange(out[lo:hi], x[lo:hi], y[lo:hi])
	})
}

// mulRange sets out = x ⊙ y; out may be x or y.
func mulRange[T float](out, x, y []T) {
	for i := range out {
		out[i] = x[i] * y[i]
	}
}
