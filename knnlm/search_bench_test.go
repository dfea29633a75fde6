package knnlm

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkSearch: the exact search of 511 queries (one 512-token abstract's positions) against
// 65,536 float16 keys of SmolLM2's 576 values, k = 1024 (knnlm-scifact's settings).
func BenchmarkSearch(b *testing.B) {
	const D, N, B, k = 576, 65536, 511, 1024
	r := rand.New(rand.NewPCG(1, 2))
	s, err := NewStore(D, Float16)
	if err != nil {
		b.Fatal(err)
	}
	key := make([]float32, D)
	for i := range N {
		for j := range key {
			key[j] = float32(r.NormFloat64())
		}
		if err := s.Add(key, i%1000); err != nil {
			b.Fatal(err)
		}
	}
	qs := make([]float32, B*D)
	for i := range qs {
		qs[i] = float32(r.NormFloat64())
	}
	b.ResetTimer()
	for range b.N {
		s.Search(qs, k)
	}
}
