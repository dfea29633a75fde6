package model

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// SpladeChunk is the number of vocabulary columns whose logits SpladeMax holds at a time: the
// N x V logits of a batch (30,522 x 9,216 tokens is 1.1 GB in float32) are never materialised;
// each worker holds N x SpladeChunk (9,216 tokens: 37.7 MB in float32).
const SpladeChunk = 1024

// SpladeMax is SPLADE's pooling of the masked-language-model logits (Formal et al., SIGIR 2021,
// eq. 2, the max variant of SPLADE v2 / SPLADE++):
//
//	out[b,v] = max_{l: mask[b,l] > 0} log(1 + ReLU(h[b*L+l]·w[v] + bias[v]))
//
// h is [B*L,H] (the MLM transform's output per token), w is [V,H] (the decoder, tied to the word
// embeddings), bias is [V], mask is [B,L]; the result is [B,V] (0 for a sequence without real
// tokens). The logits are computed SpladeChunk vocabulary columns at a time and only the max and
// its position are kept, so the op's memory is B x V plus N x SpladeChunk per worker.
// Differentiable with respect to h, w and bias: the gradient of out[b,v] flows to its argmax
// token only (the first maximum, as torch.max), with factor 1/(1+x) = exp(-out[b,v]), and to
// nothing where every logit is <= 0 (ReLU's gradient at 0 is 0, as PyTorch's).
func SpladeMax(h, w, bias, mask *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(&spladeK{id: spladeSeq.Add(1)}, h, w, bias, mask)
}

var spladeSeq atomic.Uint64

// spladeK keeps the argmax token of every (b, v) from its last forward, which its gradient
// kernels read (a graph runs the forward before the backward of the same batch).
type spladeK struct {
	id  uint64
	arg []int32 // [B*V]: row of h of the max, -1 where no logit is positive
}

func (k *spladeK) name() string { return fmt.Sprintf("SpladeMax#%d", k.id) }
func (*spladeK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(1), ft(2), ft(2)) }
func (*spladeK) diff() []bool   { return []bool{true, true, true, false} }
func (k *spladeK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: &spladeGradK{src: k, wrt: 0}, args: []int{0, 1, argOut, argGrad}},
		{k: &spladeGradK{src: k, wrt: 1}, args: []int{0, 1, argOut, argGrad}},
		{k: &spladeGradK{src: k, wrt: 2}, args: []int{0, 1, argOut, argGrad}},
		nil,
	}
}

func (k *spladeK) shape(in []tensor.Shape) (tensor.Shape, error) {
	for _, i := range []int{0, 1, 3} {
		if err := want2D(k.name(), i, in[i]); err != nil {
			return nil, err
		}
	}
	if in[0][1] != in[1][1] {
		return nil, fmt.Errorf("model: %s: tokens %v do not fit the decoder %v ([V,H])", k.name(), in[0], in[1])
	}
	if err := wantVec(k.name(), 2, in[2], in[1][0]); err != nil {
		return nil, err
	}
	if in[3][0]*in[3][1] != in[0][0] {
		return nil, fmt.Errorf("model: %s: tokens %v are not the %v of the mask", k.name(), in[0], in[3])
	}
	return tensor.Shape{in[3][0], in[1][0]}, nil
}

func (k *spladeK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	B, L := in[3].Shape()[0], in[3].Shape()[1]
	V, H := in[1].Shape()[0], in[1].Shape()[1]
	if len(k.arg) != B*V {
		k.arg = make([]int32, B*V)
	}
	defer countGEMM(B*L, V, H)()
	switch o := out.Data().(type) {
	case []float32:
		spladeForward(o, k.arg, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), data[float32](in[3]), B, L, H, V)
	case []float64:
		spladeForward(o, k.arg, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), data[float64](in[3]), B, L, H, V)
	}
	return nil
}

func spladeForward[T float](out []T, arg []int32, h, w, bias, mask []T, B, L, H, V int) {
	N := B * L
	chunks := (V + SpladeChunk - 1) / SpladeChunk
	parallelFor(chunks, N*SpladeChunk*H, func(lo, hi int) {
		buf := make([]T, N*SpladeChunk)
		for c := lo; c < hi; c++ {
			v0 := c * SpladeChunk
			cw := min(SpladeChunk, V-v0)
			gemm(false, true, N, cw, H, 1, h, H, w[v0*H:], H, 0, buf[:N*cw], cw)
			for b := 0; b < B; b++ {
				for j := 0; j < cw; j++ {
					best, at := T(0), int32(-1)
					for l := 0; l < L; l++ {
						if mask[b*L+l] == 0 {
							continue
						}
						if x := buf[(b*L+l)*cw+j] + bias[v0+j]; x > best {
							best, at = x, int32(b*L+l)
						}
					}
					out[b*V+v0+j] = T(math.Log1p(float64(best)))
					arg[b*V+v0+j] = at
				}
			}
		}
	})
}

// spladeGradK is the gradient of SpladeMax with respect to input wrt (0 h, 1 w, 2 bias), from
// (h, w, out, g): coef[b,v] = g[b,v]·exp(-out[b,v]) at the argmax row r of (b, v) recorded by
// the forward; dh[r] += coef·w[v], dw[v] += coef·h[r], dbias[v] += coef.
type spladeGradK struct {
	noGrad
	src *spladeK
	wrt int
}

func (k *spladeGradK) name() string {
	return fmt.Sprintf("SpladeMaxGrad#%d/%d", k.src.id, k.wrt)
}
func (k *spladeGradK) typ() hm.Type {
	if k.wrt == 2 {
		return fnType(ft(2), ft(2), ft(2), ft(2), ft(1))
	}
	return fnType(ft(2), ft(2), ft(2), ft(2), ft(2))
}

func (k *spladeGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	switch k.wrt {
	case 0:
		return in[0].Clone(), nil
	case 1:
		return in[1].Clone(), nil
	}
	return tensor.Shape{in[1][0]}, nil
}

func (k *spladeGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	B, V, H := in[2].Shape()[0], in[1].Shape()[0], in[1].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		spladeGrad(o, k.src.arg, k.wrt, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), data[float32](in[3]), B, V, H)
	case []float64:
		spladeGrad(o, k.src.arg, k.wrt, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), data[float64](in[3]), B, V, H)
	}
	return nil
}

func spladeGrad[T float](out []T, arg []int32, wrt int, h, w, y, g []T, B, V, H int) {
	clear(out)
	for b := 0; b < B; b++ {
		for v := 0; v < V; v++ {
			r := int(arg[b*V+v])
			gv := g[b*V+v]
			if r < 0 || gv == 0 {
				continue
			}
			coef := gv * T(math.Exp(-float64(y[b*V+v])))
			switch wrt {
			case 0:
				axpy(out[r*H:(r+1)*H], coef, w[v*H:(v+1)*H])
			case 1:
				axpy(out[v*H:(v+1)*H], coef, h[r*H:(r+1)*H])
			case 2:
				out[v] += coef
			}
		}
	}
}

func axpy[T float](dst []T, a T, x []T) {
	for i, v := range x {
		dst[i] += a * v
	}
}
