package losses

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BenchmarkColBERTContrastive: a ColBERT training batch's loss and gradients, B = 32 queries of
// 32 tokens, N = 64 passages of 180 tokens, D = 128, float32 (go test -bench ColBERT ./losses).
func BenchmarkColBERTContrastive(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const nq, lq, n, ld, d = 32, 32, 64, 180, 128
	ins := []input{{"q", []int{nq, lq, d}, randn(r, nq*lq*d, 1), true}, {"p", []int{n, ld, d}, randn(r, n*ld*d, 1), true}}
	for i := 0; i < b.N; i++ {
		mustEval(b, tensor.Float32, func(in map[string]*G.Node) (*G.Node, error) {
			return ColBERTContrastive(in["q"], in["p"], TokenMasks{}, 1, Cosine)
		}, ins...)
	}
}
