package model

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LayerNormEps is BERT's layer_norm_eps.
const LayerNormEps = 1e-12

// LayerNorm normalises each row of x over its last axis (Ba, Kiros and
// Hinton, 2016):
//
//	y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta
//
// with the biased variance, as torch.nn.LayerNorm. x is [N,H], gamma and
// beta are [H]; the result is [N,H]. Differentiable with respect to all
// three (analytic backward).
func LayerNorm(x, gamma, beta *gorgonia.Node, eps float64) (*gorgonia.Node, error) {
	return apply(layerNormK{eps: eps}, x, gamma, beta)
}

type layerNormK struct{ eps float64 }

func (k layerNormK) name() string { return fmt.Sprintf("LayerNorm{%g}", k.eps) }
func (layerNormK) typ() hm.Type   { return fnType(ft(2), ft(1), ft(1), ft(2)) }
func (layerNormK) diff() []bool   { return []bool{true, true, true} }
func (k layerNormK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: lnGradXK{eps: k.eps}, args: []int{0, 1, argGrad}},
		{k: lnGradGammaK{eps: k.eps}, args: []int{0, argGrad}},
		{k: colSumK{}, args: []int{argGrad}},
	}
}

func (k layerNormK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	for i := 1; i < 3; i++ {
		if err := wantVec(k.name(), i, in[i], in[0][1]); err != nil {
			return nil, err
		}
	}
	return in[0].Clone(), nil
}

func (k layerNormK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		layerNorm(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), h, k.eps)
	case []float64:
		layerNorm(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), h, k.eps)
	}
	return nil
}

// rowStats returns the mean and 1/sqrt(var+eps) of a row, accumulated in
// float64.
// Four partial sums break the chain of dependent additions.
func rowStats[T float](x []T, eps float64) (mean, rstd float64) {
	var s [4]float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s[0] += float64(v[0])
		s[1] += float64(v[1])
		s[2] += float64(v[2])
		s[3] += float64(v[3])
	}
	for ; i < len(x); i++ {
		s[0] += float64(x[i])
	}
	mean = (s[0] + s[1] + (s[2] + s[3])) / float64(len(x))
	var ss [4]float64
	for i = 0; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(v[0])-mean, float64(v[1])-mean, float64(v[2])-mean, float64(v[3])-mean
		ss[0] += d0 * d0
		ss[1] += d1 * d1
		ss[2] += d2 * d2
		ss[3] += d3 * d3
	}
	for ; i < len(x); i++ {
		d := float64(x[i]) - mean
		ss[0] += d * d
	}
	return mean, 1 / math.Sqrt((ss[0]+ss[1]+(ss[2]+ss[3]))/float64(len(x))+eps)
}

func layerNorm[T float](out, x, gamma, beta []T, h int, eps float64) {
	parallelFor(len(x)/h, layerNormCost[T](h), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			layerNormRow(out[i*h:(i+1)*h], x[i*h:(i+1)*h], gamma, beta, eps)
		}
	})
}

// layerNormCost is the parallelFor cost of one row of layerNormRow.
func layerNormCost[T float](h int) int {
	var z T
	if _, ok := any(z).(float32); ok && haveAVX2FMA && h%8 == 0 {
		return 2 * h
	}
	return 8 * h
}

// layerNormRow normalises the row x into out (which may be x itself): in AVX2
// (layernorm_amd64.s) for float32 rows of a multiple of 8, else in Go.
func layerNormRow[T float](out, x, gamma, beta []T, eps float64) {
	if o32, ok := any(out).([]float32); ok && haveAVX2FMA && len(x)%8 == 0 {
		layerNormRowVec(o32, any(x).([]float32), any(gamma).([]float32), any(beta).([]float32), eps)
		return
	}
	mean, rstd := rowStats(x, eps)
	m, r := T(mean), T(rstd)
	for j, v := range x {
		out[j] = (v-m)*r*gamma[j] + beta[j]
	}
}

// lnGradXK: (x, gamma, g) -> dx with
// dx = rstd * (dxhat - mean(dxhat) - xhat*mean(dxhat*xhat)), dxhat = g*gamma.
type lnGradXK struct {
	noGrad
	eps float64
}

func (k lnGradXK) name() string { return fmt.Sprintf("LayerNormGradX{%g}", k.eps) }
func (lnGradXK) typ() hm.Type   { return fnType(ft(2), ft(1), ft(2), ft(2)) }
func (k lnGradXK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return sameShape(k.name(), "x and gradient", in, 0, 2)
}

func (k lnGradXK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		layerNormGradX(o, data[float32](in[0]), data[float32](in[1]), data[float32](in[2]), h, k.eps)
	case []float64:
		layerNormGradX(o, data[float64](in[0]), data[float64](in[1]), data[float64](in[2]), h, k.eps)
	}
	return nil
}

func layerNormGradX[T float](out, x, gamma, g []T, h int, eps float64) {
	parallelFor(len(x)/h, 12*h, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			layerNormGradXRow(out[i*h:(i+1)*h], x[i*h:(i+1)*h], gamma, g[i*h:(i+1)*h], eps)
		}
	})
}

// layerNormGradXRow is layerNormGradX on one row: x, the output gradient g
// and out (which may be x or g) have the row's h values.
func layerNormGradXRow[T float](out, x, gamma, g []T, eps float64) {
	h := len(x)
	mean, rstd := rowStats(x, eps)
	var sd, sdx float64
	for j, v := range x {
		xhat := (float64(v) - mean) * rstd
		d := float64(g[j]) * float64(gamma[j])
		sd += d
		sdx += d * xhat
	}
	sd /= float64(h)
	sdx /= float64(h)
	for j, v := range x {
		xhat := (float64(v) - mean) * rstd
		d := float64(g[j]) * float64(gamma[j])
		out[j] = T(rstd * (d - sd - xhat*sdx))
	}
}

// lnGradGammaK: (x, g) -> dgamma = Σ_rows g*xhat.
type lnGradGammaK struct {
	noGrad
	eps float64
}

func (k lnGradGammaK) name() string { return fmt.Sprintf("LayerNormGradGamma{%g}", k.eps) }
func (lnGradGammaK) typ() hm.Type   { return fnType(ft(2), ft(2), ft(1)) }
func (k lnGradGammaK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if _, err := sameShape(k.name(), "x and gradient", in); err != nil {
		return nil, err
	}
	return tensor.Shape{in[0][1]}, nil
}

func (k lnGradGammaK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		layerNormGradGamma(o, data[float32](in[0]), data[float32](in[1]), h, k.eps)
	case []float64:
		layerNormGradGamma(o, data[float64](in[0]), data[float64](in[1]), h, k.eps)
	}
	return nil
}

// layerNormGradGamma: the row statistics in parallel over rows, then the sums
// in parallel over columns, each column summed in row order whatever the
// number of workers.
func layerNormGradGamma[T float](out, x, g []T, h int, eps float64) {
	rows := len(x) / h
	stats := make([]float64, 2*rows) // mean, rstd of each row
	parallelFor(rows, 4*h, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			stats[2*i], stats[2*i+1] = rowStats(x[i*h:(i+1)*h], eps)
		}
	})
	parallelFor(h, 3*rows, func(lo, hi int) {
		acc := make([]float64, hi-lo)
		for i := 0; i < rows; i++ {
			mean, rstd := stats[2*i], stats[2*i+1]
			gr := g[i*h+lo : i*h+hi]
			for j, v := range x[i*h+lo : i*h+hi] {
				acc[j] += float64(gr[j]) * (float64(v) - mean) * rstd
			}
		}
		for j, a := range acc {
			out[lo+j] = T(a)
		}
	})
}

// GELU is the Gaussian error linear unit of BERT and GPT-2 in its exact (erf)
// form (Hendrycks and Gimpel, 2016): gelu(x) = x * Φ(x) =
// 0.5 * x * (1 + erf(x/√2)). Element-wise on a tensor of any shape.
func GELU(x *gorgonia.Node) (*gorgonia.Node, error) {
	return apply(geluK{}, x)
}

type geluK struct{}

func (geluK) name() string { return "GELU" }
func (geluK) typ() hm.Type { return fnType(tvA, tvA) }
func (geluK) diff() []bool { return []bool{true} }
func (geluK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{{k: geluGradK{}, args: []int{0, argGrad}}}
}
func (geluK) shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (geluK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	return forward1(out, in, gelu[float32], gelu[float64])
}

func gelu[T float](out, x []T) {
	if o32, ok := any(out).([]float32); ok {
		x32 := any(x).([]float32)
		parallelFor((len(x)+7)/8, 80, func(lo, hi int) {
			lo, hi = 8*lo, min(8*hi, len(x))
			done := lo + geluVec(o32[lo:hi], x32[lo:hi])
			for i := done; i < hi; i++ {
				v := float64(x32[i])
				o32[i] = float32(0.5 * v * (1 + erf32(v/math.Sqrt2)))
			}
		})
		return
	}
	parallelFor(len(x), 30, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := float64(x[i])
			out[i] = T(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
		}
	})
}

// erf32 is erf to float32 accuracy (absolute error < 1e-7): the rational
// approximation of Eigen's generic_fast_erf_float, evaluated in float64.
func erf32(x float64) float64 {
	x = max(-4, min(4, x))
	x2 := x * x
	p := x2*-2.72614225801306e-10 + 2.77068142495902e-08
	p = x2*p - 2.10102402082508e-06
	p = x2*p - 5.69250639462346e-05
	p = x2*p - 7.34990630326855e-04
	p = x2*p - 2.95459980854025e-03
	p = x2*p - 1.60960333262415e-02
	q := x2*-1.45660718464996e-05 - 2.13374055278905e-04
	q = x2*q - 1.68282697438203e-03
	q = x2*q - 7.37332916720468e-03
	q = x2*q - 1.42647390514189e-02
	return x * p / q
}

// expNeg32 is e^x for x <= 0 to float32 accuracy (relative error < 2e-7):
// x = n·ln2 + r, |r| <= ln2/2, e^r by its degree-7 Taylor polynomial.
func expNeg32(x float64) float64 {
	if x < -87 {
		return 0
	}
	n := math.Floor(x*math.Log2E + 0.5)
	r := x - n*math.Ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float64frombits(uint64(int64(n)+1023)<<52)
}

// geluGradK: (x, g) -> g * (Φ(x) + x·φ(x)).
type geluGradK struct{ noGrad }

func (geluGradK) name() string { return "GELUGrad" }
func (geluGradK) typ() hm.Type { return fnType(tvA, tvA, tvA) }
func (k geluGradK) shape(in []tensor.Shape) (tensor.Shape, error) {
	return sameShape(k.name(), "x and gradient", in)
}
func (geluGradK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	return forward2(out, in, geluGrad[float32], geluGrad[float64])
}

func geluGrad[T float](out, x, g []T) {
	const invSqrt2Pi = 0.3989422804014327
	if o32, ok := any(out).([]float32); ok {
		x32, g32 := any(x).([]float32), any(g).([]float32)
		parallelFor((len(x)+7)/8, 100, func(lo, hi int) {
			lo, hi = 8*lo, min(8*hi, len(x))
			done := lo + geluGradVec(o32[lo:hi], x32[lo:hi], g32[lo:hi])
			for i := done; i < hi; i++ {
				v := float64(x32[i])
				cdf := 0.5 * (1 + erf32(v/math.Sqrt2))
				pdf := invSqrt2Pi * expNeg32(-0.5*v*v)
				o32[i] = float32(float64(g32[i]) * (cdf + v*pdf))
			}
		})
		return
	}
	parallelFor(len(x), 40, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := float64(x[i])
			cdf := 0.5 * (1 + math.Erf(v/math.Sqrt2))
			pdf := invSqrt2Pi * math.Exp(-0.5*v*v)
			out[i] = T(float64(g[i]) * (cdf + v*pdf))
		}
	})
}
