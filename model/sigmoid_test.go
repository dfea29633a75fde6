package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSigmoidsBits: the vectorized sigmoids are the bits of 1 / (1 + math.Exp(-z)) on a million
// values over many scales, and on the edges (±700 and just past it, where the scalar path takes
// over, huge values, ±0, infinities, NaN, subnormals), in runs of every length mod 4.
func TestSigmoidsBits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var z []float64
	for _, scale := range []float64{1e-6, 0.01, 1, 4, 30, 200, 700} {
		for i := 0; i < 150000; i++ {
			z = append(z, scale*r.NormFloat64())
		}
	}
	for i := 0; i < 50000; i++ {
		z = append(z, 1400*r.Float64()-700)
	}
	edges := []float64{700, -700, 700.0000001, -700.0000001, 709.78, -745.2, 1e308, -1e308, 0, math.Copysign(0, -1),
		math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, -5e-324, 1, -1, 0.5, 36.7368005696771, -36.7368005696771}
	for k := 0; k < 7; k++ { // the edges at every offset, between runs of 0..6 ordinary values
		for _, e := range edges {
			for j := 0; j < k; j++ {
				z = append(z, r.NormFloat64())
			}
			z = append(z, e)
		}
	}
	got := append([]float64(nil), z...)
	sigmoids(got)
	for i, v := range z {
		want := sigmoid(v)
		if math.Float64bits(got[i]) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(got[i])) {
			t.Fatalf("sigmoid(%v) = %v (%#x), 1/(1+math.Exp(-z)) = %v (%#x)", v, got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
		}
	}
	if sigmoid4(got, len(got)) == 0 {
		t.Log("no AVX2+FMA: the scalar path only")
	}
}
