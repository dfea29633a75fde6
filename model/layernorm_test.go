package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerNorm32 compares the float32 LayerNorm (AVX2 rows where the width
// is a multiple of 8, Go elsewhere) with the float64 one, on rows with
// common offsets up to 40 times their spread and widths around the 8-lane
// width.
func TestLayerNorm32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, h := range []int{8, 13, 16, 128} {
		const n = 5
		x64, g64, b64 := make([]float64, n*h), make([]float64, h), make([]float64, h)
		x32, g32, b32 := make([]float32, n*h), make([]float32, h), make([]float32, h)
		for i := range x64 {
			x32[i] = float32(10*float64(i/h) + r.NormFloat64())
			x64[i] = float64(x32[i])
		}
		for j := range g64 {
			g32[j], b32[j] = float32(1+0.1*r.NormFloat64()), float32(r.NormFloat64())
			g64[j], b64[j] = float64(g32[j]), float64(b32[j])
		}
		want, got := make([]float64, len(x64)), make([]float32, len(x32))
		layerNorm(want, x64, g64, b64, h, LayerNormEps)
		layerNorm(got, x32, g32, b32, h, LayerNormEps)
		for i := range got {
			if d := math.Abs(float64(got[i]) - want[i]); !(d <= 5e-6*math.Max(1, math.Abs(want[i]))) {
				t.Fatalf("%s: out[%d] = %v, float64 %v", fmt.Sprintf("h=%d", h), i, got[i], want[i])
			}
		}
	}
}
