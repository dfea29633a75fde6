package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMaskedSoftmax32 compares the float32 softmax (AVX2 exponentials where
// available) with the float64 one on random scores: lengths around the
// 8-lane width, padding, causal masks, a sequence with no real token (all
// zero weights) and a mask value other than 0 and 1 (the generic row).
func TestMaskedSoftmax32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, l := range []int{1, 7, 8, 13, 64} {
		for _, causal := range []bool{false, true} {
			const B, nh = 4, 3
			s64 := make([]float64, B*nh*l*l)
			for i := range s64 {
				s64[i] = 8 * r.NormFloat64()
			}
			m64 := make([]float64, B*l)
			for b := 0; b < B; b++ {
				n := []int{l, (l + 1) / 2, 0, l}[b]
				for j := 0; j < n; j++ {
					m64[b*l+j] = 1
				}
			}
			m64[3*l] = 0.5 // sequence 3: a weighted key
			s32, m32 := make([]float32, len(s64)), make([]float32, len(m64))
			for i, v := range s64 {
				s32[i] = float32(v)
				s64[i] = float64(s32[i])
			}
			for i, v := range m64 {
				m32[i] = float32(v)
			}
			want, got := make([]float64, len(s64)), make([]float32, len(s32))
			maskedSoftmax(want, s64, m64, nh, l, causal)
			for i := range got {
				got[i] = float32(math.NaN()) // every element must be written
			}
			maskedSoftmax(got, s32, m32, nh, l, causal)
			name := fmt.Sprintf("L=%d causal=%v", l, causal)
			for i := range got {
				if d := math.Abs(float64(got[i]) - want[i]); !(d <= 2e-6) {
					t.Fatalf("%s: weight %d = %v, float64 %v", name, i, got[i], want[i])
				}
			}
			for row := 0; row < B*nh*l; row++ {
				var sum float64
				for _, v := range got[row*l : (row+1)*l] {
					sum += float64(v)
				}
				b := row / (nh * l)
				if b == 2 {
					if sum != 0 {
						t.Fatalf("%s: row %d of an empty sequence sums to %v", name, row, sum)
					}
					continue
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("%s: row %d sums to %v", name, row, sum)
				}
			}
		}
	}
}
