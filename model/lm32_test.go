package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestLMForward32 compares the float32 log-probabilities and softmax of
// LMLogProb (AVX2 maximum and exponentials) with the float64 ones, for
// vocabularies around the 8-lane width and an unused entry (pos -1).
func TestLMForward32(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, v := range []int{5, 8, 67, 2000} {
		const n, h = 6, 16
		x64, e64 := make([]float64, n*h), make([]float64, v*h)
		x32, e32 := make([]float32, n*h), make([]float32, v*h)
		for i := range x64 {
			x32[i] = float32(r.NormFloat64())
			x64[i] = float64(x32[i])
		}
		for i := range e64 {
			e32[i] = float32(r.NormFloat64())
			e64[i] = float64(e32[i])
		}
		pos, tgt := []int{0, 3, -1, 5}, []int{0, v - 1, 0, v / 2}
		M := len(pos)
		want, got := make([]float64, M), make([]float32, M)
		p64, p32 := make([]float64, M*v), make([]float32, M*v)
		lmForward(want, x64, e64, pos, tgt, h, v, make([]float64, M*h), p64)
		lmForward(got, x32, e32, pos, tgt, h, v, make([]float32, M*h), p32)
		name := fmt.Sprintf("V=%d", v)
		for m := range got {
			if d := math.Abs(float64(got[m]) - want[m]); !(d <= 1e-5*math.Max(1, math.Abs(want[m]))) {
				t.Fatalf("%s: log p[%d] = %v, float64 %v", name, m, got[m], want[m])
			}
		}
		for i := range p32 {
			if d := math.Abs(float64(p32[i]) - p64[i]); !(d <= 1e-6) {
				t.Fatalf("%s: p[%d] = %v, float64 %v", name, i, p32[i], p64[i])
			}
		}
	}
}
