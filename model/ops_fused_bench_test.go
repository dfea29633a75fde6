package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// benchGraph builds float32 leaves, the op by build and a weighted-sum loss with its gradients
// with respect to every leaf, and times b.N forward + backward runs of the graph.
func benchGraph(b *testing.B, leaves []*tensor.Dense, flops float64, build func(x []*gorgonia.Node) (*gorgonia.Node, error)) {
	b.Helper()
	g := gorgonia.NewGraph()
	nodes := make([]*gorgonia.Node, len(leaves))
	for i, l := range leaves {
		nodes[i] = leafIn(g, fmt.Sprintf("leaf%d", i), toFloat32(l))
	}
	out, err := build(nodes)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := weightedSum(out, 7)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, nodes...); err != nil {
		b.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	b.ResetTimer()
	for range b.N {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
	}
	if flops > 0 {
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
}

// BenchmarkAttention times the fused per-head-block attention (Attention: scores, mask,
// softmax and context in one op, no [B, heads, L, L] tensor) against the unfused chain
// (AttentionScores, MaskedSoftmax, Dropout, AttentionContext), forward and backward in float32,
// at all-MiniLM-L6-v2's head shapes (12 heads of 32) for 8 passages of L 256, padded as
// attnMask pads them. GFLOP/s counts the four [L, L] products forward and backward (2·B·heads·
// L²·dh each, six of them), the masked rows included.
func BenchmarkAttention(b *testing.B) {
	const B, L, heads, dh = 8, 256, 12, 32
	r := rand.New(rand.NewPCG(1, 2))
	H := heads * dh
	leaves := []*tensor.Dense{randDense(r, B*L, H), randDense(r, B*L, H), randDense(r, B*L, H)}
	mask := toFloat32(attnMask(B, L, false))
	flops := 6 * 2 * float64(B*heads*L*L*dh)
	for _, fused := range []bool{true, false} {
		for _, p := range []float64{0, 0.1} {
			b.Run(fmt.Sprintf("fused=%t/dropout=%g", fused, p), func(b *testing.B) {
				o := AttentionOptions{L: L, Heads: heads, Scale: 1 / math.Sqrt(dh), Dropout: p, RNG: &RNG{R: rand.New(rand.NewPCG(5, 0))}}
				benchGraph(b, leaves, flops, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
					m := gorgonia.NodeFromAny(n[0].Graph(), mask, gorgonia.WithName("mask"))
					if fused {
						return Attention(n[0], n[1], n[2], m, o)
					}
					return unfusedAttention(n[0], n[1], n[2], m, o)
				})
			})
		}
	}
}

// BenchmarkAddLayerNorm times the fused residual LayerNorm (AddLayerNorm) against Add then
// LayerNorm, forward and backward in float32, on [N, 384] rows (MiniLM's width; N = 2,048
// is 8 passages of L 256).
func BenchmarkAddLayerNorm(b *testing.B) {
	const N, H = 2048, 384
	r := rand.New(rand.NewPCG(3, 4))
	leaves := []*tensor.Dense{randDense(r, N, H), randDense(r, N, H), randDense(r, H), randDense(r, H)}
	for _, fused := range []bool{true, false} {
		b.Run(fmt.Sprintf("fused=%t", fused), func(b *testing.B) {
			benchGraph(b, leaves, 0, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
				if fused {
					return AddLayerNorm(n[0], n[1], n[2], n[3], LayerNormEps)
				}
				s, err := Add(n[0], n[1])
				if err != nil {
					return nil, err
				}
				return LayerNorm(s, n[2], n[3], LayerNormEps)
			})
		})
	}
}

// BenchmarkLinearGELU times the fused feed-forward input layer (LinearGELU: x·Wᵀ + b and GELU
// in one op) against Linear then GELU, forward and backward in float32, at MiniLM's [N, 384] x
// [1536, 384] (N = 2,048). GFLOP/s counts the three products (2·N·H·F each).
func BenchmarkLinearGELU(b *testing.B) {
	const N, H, F = 2048, 384, 1536
	r := rand.New(rand.NewPCG(5, 6))
	leaves := []*tensor.Dense{randDense(r, N, H), randDense(r, F, H), randDense(r, F)}
	flops := 3 * 2 * float64(N*H*F)
	for _, fused := range []bool{true, false} {
		b.Run(fmt.Sprintf("fused=%t", fused), func(b *testing.B) {
			benchGraph(b, leaves, flops, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
				if fused {
					return LinearGELU(n[0], n[1], n[2])
				}
				h, err := Linear(n[0], n[1], n[2])
				if err != nil {
					return nil, err
				}
				return GELU(h)
			})
		})
	}
}
