package model

import (
	"fmt"
	"math"
	"sync"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The ops of the LLaMA decoder (llama.go): RMSNorm, rotary position embeddings, the SwiGLU gate
// and the key/value head repetition of grouped-query attention. Each runs in float32 and
// float64 and is differentiable (analytic backward, checked by finite differences in
// llama_ops_test.go).

// RMSNorm scales each row of x by the reciprocal of its root mean square (Zhang and Sennrich,
// 2019, "Root Mean Square Layer Normalization", eq. 4; transformers' LlamaRMSNorm):
//
//	y = x / sqrt(mean(x²) + eps) ⊙ w
//
// x is [N,H], w is [H]; the result is [N,H]. The row's mean square is accumulated in float64.
// Differentiable with respect to x and w.
func RMSNorm(x, w *gorgonia.Node, eps float64) (*gorgonia.Node, error) {
	return apply(rmsNormK{eps: eps}, x, w)
}

type rmsNormK struct{ eps float64 }

func (k rmsNormK) name() string { return fmt.Sprintf("RMSNorm{%g}", k.eps) }
func (rmsNormK) typ() hm.Type   { return fnType(ft(2), ft(1), ft(2)) }
func (rmsNormK) diff() []bool   { return []bool{true, true} }
func (k rmsNormK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: rmsGradK{eps: k.eps, wrtW: false}, args: []int{0, 1, argGrad}},
		{k: rmsGradK{eps: k.eps, wrtW: true}, args: []int{0, 1, argGrad}},
	}
}

func (k rmsNormK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if err := wantVec(k.name(), 1, in[1], in[0][1]); err != nil {
		return nil, err
	}
	return in[0].Clone(), nil
}

func (k rmsNormK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		rmsNorm(o, data[float32](in[0]), data[float32](in[1]), h, k.eps)
	case []float64:
		rmsNorm(o, data[float64](in[0]), data[float64](in[1]), h, k.eps)
	}
	return nil
}

// rmsScale returns 1/sqrt(mean(x²)+eps), accumulated in float64.
func rmsScale[T float](x []T, eps float64) float64 {
	var s [4]float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s[0] += float64(v[0]) * float64(v[0])
		s[1] += float64(v[1]) * float64(v[1])
		s[2] += float64(v[2]) * float64(v[2])
		s[3] += float64(v[3]) * float64(v[3])
	}
	for ; i < len(x); i++ {
		s[0] += float64(x[i]) * float64(x[i])
	}
	return 1 / math.Sqrt((s[0]+s[1]+(s[2]+s[3]))/float64(len(x))+eps)
}

func rmsNorm[T float](out, x, w []T, h int, eps float64) {
	parallelFor(len(x)/h, 4*h, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			rmsNormRow(out[i*h:(i+1)*h], x[i*h:(i+1)*h], w, eps)
		}
	})
}

// rmsNormRow normalises one row x into out (which may be x). As torch: the row times its scale
// is rounded to T before the weight multiplies it.
func rmsNormRow[T float](out, x, w []T, eps float64) {
	r := T(rmsScale(x, eps))
	for j, v := range x {
		out[j] = w[j] * (v * r)
	}
}

// rmsGradK: (x, w, g) -> dx [N,H] or, with wrtW, dw [H]. With r = 1/sqrt(mean(x²)+eps) per
// row and d = g ⊙ w:
//
//	dx = r·d - x·r³·mean(d ⊙ x)
//	dw = Σ_rows g ⊙ x·r
type rmsGradK struct {
	noGrad
	eps  float64
	wrtW bool
}

func (k rmsGradK) name() string { return fmt.Sprintf("RMSNormGrad{%g,w=%t}", k.eps, k.wrtW) }
func (k rmsGradK) typ() hm.Type {
	if k.wrtW {
		return fnType(ft(2), ft(1), ft(2), ft(1))
	}
	return fnType(ft(2), ft(1), ft(2), ft(2))
}
func (k rmsGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if _, err := sameShape(k.name(), "x and gradient", in, 0, 2); err != nil {
		return nil, err
	}
	if k.wrtW {
		return in[1].Clone(), nil
	}
	return in[0].Clone(), nil
}

func (k rmsGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		rmsNormGrad(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), h, k.eps, k.wrtW)
	case []float64:
		rmsNormGrad(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), h, k.eps, k.wrtW)
	}
	return nil
}

func rmsNormGrad[T float](out, x, w, g []T, h int, eps float64, wrtW bool) {
	rows := len(x) / h
	if !wrtW {
		parallelFor(rows, 8*h, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				xr, gr, o := x[i*h:(i+1)*h], g[i*h:(i+1)*h], out[i*h:(i+1)*h]
				r := rmsScale(xr, eps)
				var s float64
				for j, v := range xr {
					s += float64(gr[j]) * float64(w[j]) * float64(v)
				}
				c := r * r * r * s / float64(h)
				for j, v := range xr {
					o[j] = T(r*float64(gr[j])*float64(w[j]) - float64(v)*c)
				}
			}
		})
		return
	}
	scale := make([]float64, rows)
	parallelFor(rows, 2*h, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			scale[i] = rmsScale(x[i*h:(i+1)*h], eps)
		}
	})
	parallelFor(h, 3*rows, func(lo, hi int) {
		acc := make([]float64, hi-lo)
		for i := 0; i < rows; i++ {
			gr, xr := g[i*h+lo:i*h+hi], x[i*h+lo:i*h+hi]
			for j, v := range xr {
				acc[j] += float64(gr[j]) * float64(v) * scale[i]
			}
		}
		for j, a := range acc {
			out[lo+j] = T(a)
		}
	})
}

// RoPEOptions are the parameters of RoPE.
type RoPEOptions struct {
	L     int     // sequence length: row r of x is position r mod L (plus Offset)
	Heads int     // heads of x: x is [N, Heads·dh], dh even
	Theta float64 // the base of the frequencies (rope_theta; 10000 in Su et al.)
	// Offset is the position of each sequence's first row (0 in training; the cached length in
	// incremental decoding).
	Offset int
}

// RoPE rotates every head of x by its position (Su et al., 2021, "RoFormer: Enhanced
// Transformer with Rotary Position Embedding", eq. 34), in transformers' rotate_half layout
// (apply_rotary_pos_emb): with half = dh/2, frequency f_i = Theta^(-2i/dh) and angle
// a = position·f_i, for i < half
//
//	y[i]      = x[i]·cos a - x[i+half]·sin a
//	y[i+half] = x[i+half]·cos a + x[i]·sin a
//
// x is [B·L, Heads·dh], sequence b at rows b·L..b·L+L-1; the result has x's shape. The angles
// are computed as transformers computes them in float32 (f_i = 1/Theta^(2i/dh) rounded to
// float32, then position·f_i in float32, cos and sin of that). The gradient is the rotation by
// -a. Differentiable with respect to x.
func RoPE(x *gorgonia.Node, o RoPEOptions) (*gorgonia.Node, error) {
	return apply(ropeK{o: o}, x)
}

type ropeK struct {
	o       RoPEOptions
	inverse bool // rotate by -a (the gradient)
}

func (k ropeK) name() string {
	return fmt.Sprintf("RoPE{L=%d,heads=%d,theta=%g,offset=%d,inverse=%t}", k.o.L, k.o.Heads, k.o.Theta, k.o.Offset, k.inverse)
}
func (ropeK) typ() hm.Type { return fnType(ft(2), ft(2)) }
func (ropeK) diff() []bool { return []bool{true} }
func (k ropeK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: ropeK{o: k.o, inverse: !k.inverse}, args: []int{argGrad}}}
}

func (k ropeK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	s, o := in[0], k.o
	if o.L <= 0 || o.Heads <= 0 || o.Offset < 0 || s[0]%o.L != 0 || s[1]%o.Heads != 0 || (s[1]/o.Heads)%2 != 0 {
		return nil, fmt.Errorf("model: %s: x has shape %v, want [B*%d, %d*dh] with dh even", k.name(), s, o.L, o.Heads)
	}
	if !(o.Theta > 1) {
		return nil, fmt.Errorf("model: %s: theta %g, want > 1", k.name(), o.Theta)
	}
	return s.Clone(), nil
}

func (k ropeK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	s := in[0].Shape()
	dh := s[1] / k.o.Heads
	cs := ropeTable(k.o.Theta, dh, k.o.Offset+k.o.L)
	switch o := out.Data().(type) {
	case []float32:
		rope(o, data[float32](in[0]), cs, k.o, dh, k.inverse)
	case []float64:
		rope(o, data[float64](in[0]), cs, k.o, dh, k.inverse)
	}
	return nil
}

// ropeCosSin holds cos and sin of the angles of positions 0..n-1: row p has half cos values,
// then half sin values.
type ropeCosSin struct {
	half, n int
	v       []float32
}

func (c *ropeCosSin) at(p int) (cos, sin []float32) {
	r := c.v[p*2*c.half : (p+1)*2*c.half]
	return r[:c.half], r[c.half:]
}

var ropeTables sync.Map // ropeKey -> *ropeCosSin, the longest table computed so far

type ropeKey struct {
	theta float64
	dh    int
}

// ropeTable returns a table of at least n positions for head size dh, computed once per
// (theta, dh) and grown (at least doubled) as needed. Angles as transformers' LlamaRotaryEmbedding (float32).
func ropeTable(theta float64, dh, n int) *ropeCosSin {
	key := ropeKey{theta, dh}
	n = max(n, 64)
	if t, ok := ropeTables.Load(key); ok {
		if t.(*ropeCosSin).n >= n {
			return t.(*ropeCosSin)
		}
		n = max(n, 2*t.(*ropeCosSin).n) // decoding asks for one position more at every step
	}
	half := dh / 2
	inv := make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(dh)
		inv[i] = 1 / float32(math.Pow(theta, float64(e)))
	}
	t := &ropeCosSin{half: half, n: n, v: make([]float32, n*dh)}
	for p := 0; p < n; p++ {
		cos, sin := t.at(p)
		for i, f := range inv {
			a := float64(float32(p) * f)
			cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	ropeTables.Store(key, t)
	return t
}

func rope[T float](out, x []T, cs *ropeCosSin, o RoPEOptions, dh int, inverse bool) {
	w := o.Heads * dh
	parallelFor(len(x)/w, 3*w, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			cos, sin := cs.at(o.Offset + r%o.L)
			for h := 0; h < o.Heads; h++ {
				i0 := r*w + h*dh
				ropeHead(out[i0:i0+dh], x[i0:i0+dh], cos, sin, inverse)
			}
		}
	})
}

// ropeHead rotates one head's dh values (out may be x).
func ropeHead[T float](out, x []T, cos, sin []float32, inverse bool) {
	half := len(cos)
	for i := 0; i < half; i++ {
		c, s := T(cos[i]), T(sin[i])
		if inverse {
			s = -s
		}
		a, b := x[i], x[i+half]
		out[i] = a*c - b*s
		out[i+half] = b*c + a*s
	}
}

// SwiGLU is the gated activation of LLaMA's feed-forward block (Shazeer, 2020, "GLU Variants
// Improve Transformer", eq. 5, with Swish β = 1, i.e. SiLU):
//
//	y = silu(gate) ⊙ up,  silu(z) = z·σ(z)
//
// gate and up are [N,F] (the two projections x·W_gateᵀ and x·W_upᵀ); the result is [N,F].
// Differentiable with respect to both.
func SwiGLU(gate, up *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(swigluK{}, gate, up)
}

type swigluK struct{}

func (swigluK) name() string { return "SwiGLU" }
func (swigluK) typ() hm.Type { return fnType(ft(2), ft(2), ft(2)) }
func (swigluK) diff() []bool { return []bool{true, true} }
func (swigluK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: swigluGradK{wrtUp: false}, args: []int{0, 1, argGrad}},
		{k: swigluGradK{wrtUp: true}, args: []int{0, 1, argGrad}},
	}
}
func (k swigluK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	return sameShape(k.name(), "gate and up", in)
}
func (swigluK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	return forward2(out, in, swiglu[float32], swiglu[float64])
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// sigmoids sets s[i] = sigmoid(s[i]), the same bits: runs of values within [-700, 700] four at
// a time in AVX2 (sigmoid4: math.Exp's own operations on four lanes), the rest by sigmoid.
func sigmoids(s []float64) {
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= -700 && s[j] <= 700 {
			j++
		}
		i += sigmoid4(s[i:], j-i)
		for end := min(j+1, len(s)); i < end; i++ {
			s[i] = sigmoid(s[i])
		}
	}
}

// sigmoidChunk is the number of gate values whose sigmoids swiglu and swigluGrad compute at once.
const sigmoidChunk = 256

// gateSigmoids sets s[i] = sigmoid(gate[i]) for i < len(s).
func gateSigmoids[T float](s []float64, gate []T) {
	for i := range s {
		s[i] = float64(gate[i])
	}
	sigmoids(s)
}

func swiglu[T float](out, gate, up []T) {
	parallelFor(len(out), 20, func(lo, hi int) {
		var buf [sigmoidChunk]float64
		for c := lo; c < hi; c += sigmoidChunk {
			s := buf[:min(sigmoidChunk, hi-c)]
			gateSigmoids(s, gate[c:])
			for i, si := range s {
				z := float64(gate[c+i])
				out[c+i] = T(z*si) * up[c+i]
			}
		}
	})
}

// swigluGradK: (gate, up, g) -> d gate = g ⊙ up ⊙ σ(z)(1 + z(1-σ(z))), or with wrtUp
// d up = g ⊙ silu(gate).
type swigluGradK struct {
	noGrad
	wrtUp bool
}

func (k swigluGradK) name() string { return fmt.Sprintf("SwiGLUGrad{up=%t}", k.wrtUp) }
func (swigluGradK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(2), ft(2)) }
func (k swigluGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return sameShape(k.name(), "gate, up and gradient", in)
}
func (k swigluGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		swigluGrad(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), k.wrtUp)
	case []float64:
		swigluGrad(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), k.wrtUp)
	}
	return nil
}

func swigluGrad[T float](out, gate, up, g []T, wrtUp bool) {
	parallelFor(len(out), 25, func(lo, hi int) {
		var buf [sigmoidChunk]float64
		for c := lo; c < hi; c += sigmoidChunk {
			ss := buf[:min(sigmoidChunk, hi-c)]
			gateSigmoids(ss, gate[c:])
			for k, s := range ss {
				i := c + k
				z := float64(gate[i])
				if wrtUp {
					out[i] = T(float64(g[i]) * z * s)
				} else {
					out[i] = T(float64(g[i]) * float64(up[i]) * s * (1 + z*(1-s)))
				}
			}
		}
	})
}

// RepeatKV widens the keys or values of grouped-query attention (Ainslie et al., 2023, "GQA")
// to one head per query head, as transformers' repeat_kv: x is [N, kvHeads·dh], the result
// [N, heads·dh] whose head j is x's head j / (heads/kvHeads). heads must be a multiple of
// kvHeads. The gradient sums each group's heads. Differentiable with respect to x.
func RepeatKV(x *gorgonia.Node, kvHeads, heads int) (*gorgonia.Node, error) {
	return apply(repeatKVK{kv: kvHeads, heads: heads}, x)
}

type repeatKVK struct {
	kv, heads int
	sum       bool // the gradient: [N, heads·dh] -> [N, kv·dh], summing groups
}

func (k repeatKVK) name() string {
	return fmt.Sprintf("RepeatKV{%d->%d,sum=%t}", k.kv, k.heads, k.sum)
}
func (repeatKVK) typ() hm.Type { return fnType(ft(2), ft(2)) }
func (repeatKVK) diff() []bool { return []bool{true} }
func (k repeatKVK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: repeatKVK{kv: k.kv, heads: k.heads, sum: !k.sum}, args: []int{argGrad}}}
}
func (k repeatKVK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	if k.kv <= 0 || k.heads%k.kv != 0 {
		return nil, fmt.Errorf("model: %s: %d heads are not a multiple of %d key/value heads", k.name(), k.heads, k.kv)
	}
	from, to := k.kv, k.heads
	if k.sum {
		from, to = to, from
	}
	if in[0][1]%from != 0 {
		return nil, fmt.Errorf("model: %s: input %v does not split into %d heads", k.name(), in[0], from)
	}
	return tensor.Shape{in[0][0], in[0][1] / from * to}, nil
}
func (k repeatKVK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	s := in[0].Shape()
	dh := s[1] / k.kv
	if k.sum {
		dh = s[1] / k.heads
	}
	switch o := out.Data().(type) {
	case []float32:
		repeatKV(o, data[float32](in[0]), k, dh)
	case []float64:
		repeatKV(o, data[float64](in[0]), k, dh)
	}
	return nil
}

func repeatKV[T float](out, x []T, k repeatKVK, dh int) {
	group := k.heads / k.kv
	wide, narrow := k.heads*dh, k.kv*dh
	rows := len(x) / narrow
	if k.sum {
		rows = len(x) / wide
	}
	parallelFor(rows, wide, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			for j := 0; j < k.heads; j++ {
				w := r*wide + j*dh           // head j of a wide row
				n := r*narrow + (j/group)*dh // its key/value head in a narrow row
				switch {
				case !k.sum:
					copy(out[w:w+dh], x[n:n+dh])
				case j%group == 0:
					copy(out[n:n+dh], x[w:w+dh])
				default:
					addInto(out[n:n+dh], x[w:w+dh])
				}
			}
		}
	})
}
