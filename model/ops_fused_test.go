package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// runLeaves builds leaves (converted to dtype dt) into a graph, the op under test by build and
// a weighted-sum loss, runs it twice and returns the op's output and the loss's gradient with
// respect to every leaf, per run.
func runLeaves(t *testing.T, dt tensor.Dtype, leaves []*tensor.Dense, build func(x []*gorgonia.Node) (*gorgonia.Node, error)) [][][]float64 {
	t.Helper()
	g := gorgonia.NewGraph()
	nodes := make([]*gorgonia.Node, len(leaves))
	for i, l := range leaves {
		v := l.Clone().(*tensor.Dense)
		if dt == tensor.Float32 {
			v = toFloat32(l)
		}
		nodes[i] = leafIn(g, fmt.Sprintf("leaf%d", i), v)
	}
	out, err := build(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var ov gorgonia.Value
	gorgonia.Read(out, &ov)
	loss, err := weightedSum(out, 7)
	if err != nil {
		t.Fatal(err)
	}
	grads, err := gorgonia.Grad(loss, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	var res [][][]float64
	for range 2 {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		r := [][]float64{values(ov)}
		for _, gr := range grads {
			r = append(r, values(gr.Value()))
		}
		res = append(res, r)
	}
	return res
}

func sameLeafRuns(t *testing.T, got, want [][][]float64, names []string) {
	t.Helper()
	for run := range got {
		for i := range got[run] {
			what := fmt.Sprintf("run %d output", run)
			if i > 0 {
				what = fmt.Sprintf("run %d d/d %s", run, names[i-1])
			}
			sameBits(t, what, got[run][i], want[run][i])
		}
	}
}

// fusedShapes are [N,H] shapes for the fused ops: rows of the AVX2 LayerNorm (H a multiple of
// 8) and of the Go one, one row and many (parallel rows), GEMM edges and full 12 x 32 blocks.
var fusedShapes = []struct{ N, H, F int }{{1, 8, 5}, {3, 5, 7}, {7, 16, 24}, {40, 32, 48}, {300, 64, 96}}

// TestAddLayerNormMatchesUnfused: AddLayerNorm's output and its gradients with respect to x,
// r, gamma and beta equal those of Add then LayerNorm bit for bit, in float32 and float64, on
// row widths that take the AVX2 LayerNorm and that do not.
func TestAddLayerNormMatchesUnfused(t *testing.T) {
	names := []string{"x", "r", "gamma", "beta"}
	for _, sh := range fusedShapes {
		r := rand.New(rand.NewPCG(uint64(sh.N), uint64(sh.H)))
		x, res, gamma, beta := randDense(r, sh.N, sh.H), randDense(r, sh.N, sh.H), randDense(r, sh.H), randDense(r, sh.H)
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("N%d H%d %v", sh.N, sh.H, dt), func(t *testing.T) {
				leaves := []*tensor.Dense{x, res, gamma, beta}
				got := runLeaves(t, dt, leaves, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
					return AddLayerNorm(n[0], n[1], n[2], n[3], LayerNormEps)
				})
				want := runLeaves(t, dt, leaves, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
					s, err := Add(n[0], n[1])
					if err != nil {
						return nil, err
					}
					return LayerNorm(s, n[2], n[3], LayerNormEps)
				})
				sameLeafRuns(t, got, want, names)
			})
		}
	}
}

// TestLinearGELUMatchesUnfused: LinearGELU's output and its gradients with respect to x, w
// and b equal those of Linear then GELU bit for bit, in float32 and float64.
func TestLinearGELUMatchesUnfused(t *testing.T) {
	names := []string{"x", "w", "b"}
	for _, sh := range fusedShapes {
		r := rand.New(rand.NewPCG(uint64(sh.N), uint64(sh.F)))
		x, w, b := randDense(r, sh.N, sh.H), randDense(r, sh.F, sh.H), randDense(r, sh.F)
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("N%d H%d F%d %v", sh.N, sh.H, sh.F, dt), func(t *testing.T) {
				leaves := []*tensor.Dense{x, w, b}
				got := runLeaves(t, dt, leaves, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
					return LinearGELU(n[0], n[1], n[2])
				})
				want := runLeaves(t, dt, leaves, func(n []*gorgonia.Node) (*gorgonia.Node, error) {
					h, err := Linear(n[0], n[1], n[2])
					if err != nil {
						return nil, err
					}
					return GELU(h)
				})
				sameLeafRuns(t, got, want, names)
			})
		}
	}
}

// TestFusedOpGradients checks AddLayerNorm's and LinearGELU's gradients against finite
// differences in float64.
func TestFusedOpGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	gradCheck(t, gradCase{
		name:   "AddLayerNorm",
		leaves: []*tensor.Dense{randDense(r, 3, 5), randDense(r, 3, 5), randDense(r, 5), randDense(r, 5)},
		build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return AddLayerNorm(x[0], x[1], x[2], x[3], 1e-5)
		}),
	}, 1000, 1e-6)
	gradCheck(t, gradCase{
		name:   "LinearGELU",
		leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 5, 4), randDense(r, 5)},
		build:  lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) { return LinearGELU(x[0], x[1], x[2]) }),
	}, 1000, 1e-6)
}

// TestTowerFusedNormGELUMatchesUnfused: whole towers with AddLayerNorm (and, in inference,
// LinearGELU) give the loss, outputs and parameter gradients of towers built from Add,
// LayerNorm, Linear and GELU bit for bit: a BERT bi-encoder training step (shared or separate
// towers, dropout, padding, causal or not), a cross-encoder step, and inference encodings, in
// float32 and float64, with shared buffers and without.
func TestTowerFusedNormGELUMatchesUnfused(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, c := range []struct {
			shared, causal, share bool
			pooling               string
		}{{true, false, false, PoolingMean}, {false, true, true, PoolingCLS}, {true, true, true, PoolingMean}} {
			t.Run(fmt.Sprintf("bi %v shared=%t causal=%t buffers=%t", dt, c.shared, c.causal, c.share), func(t *testing.T) {
				cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 23, Hidden: 16, Layers: 2, Heads: 2, FFN: 24, MaxPosition: 16,
					Dropout: 0.15, Causal: c.causal, Pooling: c.pooling}
				const B, L = 4, 9
				run := func(fused bool) ([]towerRun, []string) {
					m, err := newBiEncoder(cfg, c.shared, 11, dt)
					if err != nil {
						t.Fatal(err)
					}
					m.Query.unfusedNormGELU, m.Passage.unfusedNormGELU = !fused, !fused
					pg := newPairGraph(t, m, B, L, true, sumLoss)
					r := rand.New(rand.NewPCG(3, 3))
					qi, qm, qt := tinyBatch(r, B, L, cfg.Vocab)
					pi, pm, pt := tinyBatch(r, B, L, cfg.Vocab)
					for i := range pm[:L] { // one passage fills L
						pi[i], pm[i] = 1+r.IntN(cfg.Vocab-1), 1
					}
					if err := pg.qIn.Let(qi, qm, qt); err != nil {
						t.Fatal(err)
					}
					if err := pg.pIn.Let(pi, pm, pt); err != nil {
						t.Fatal(err)
					}
					wantFused(t, pg.g, fused, 2*2*cfg.Layers, 0) // two per layer in each of the two graphs
					res := runModelShared(t, pg.loss, []*gorgonia.Node{pg.q, pg.p}, pg.binder, func(run int) {
						m.SetRNG(rand.New(rand.NewPCG(8, uint64(run))))
					}, c.share)
					return res, boundNames(pg.binder)
				}
				got, names := run(true)
				want, _ := run(false)
				sameRuns(t, got, want, names)
			})
		}
		t.Run(fmt.Sprintf("cross %v", dt), func(t *testing.T) {
			run := func(fused bool) ([]towerRun, []string) {
				return crossEncoderStep(t, dt, true, func(m *CrossEncoder) { m.Encoder.unfusedNormGELU = !fused })
			}
			got, names := run(true)
			want, _ := run(false)
			sameRuns(t, got, want, names)
		})
		t.Run(fmt.Sprintf("inference %v", dt), func(t *testing.T) {
			cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 23, Hidden: 16, Layers: 3, Heads: 2, FFN: 24, MaxPosition: 16, Pooling: PoolingMean}
			const B, L = 5, 11
			ids, mask, types := tinyBatch(rand.New(rand.NewPCG(3, 4)), B, L, cfg.Vocab)
			enc := func(fused, share bool) []float64 {
				m, err := newBiEncoder(cfg, true, 11, dt)
				if err != nil {
					t.Fatal(err)
				}
				m.Query.unfusedNormGELU = !fused
				g, v := inferenceGraph(t, m.Query, B, L, share, ids, mask, types)
				wantFused(t, g, fused, cfg.Layers*2, cfg.Layers)
				return v
			}
			want := enc(false, false)
			sameBits(t, "fused encoding", enc(true, false), want)
			sameBits(t, "fused encoding, shared buffers", enc(true, true), want)
		})
	}
}

// wantFused checks that g holds norms AddLayerNorm and gelus LinearGELU ops when fused, and
// none of either otherwise.
func wantFused(t *testing.T, g *gorgonia.ExprGraph, fused bool, norms, gelus int) {
	t.Helper()
	n, l := countOps(g, "AddLayerNorm{"), countOps(g, "LinearGELU")
	if !fused {
		norms, gelus = 0, 0
	}
	if n != norms || l != gelus {
		t.Fatalf("fused=%t: %d AddLayerNorm and %d LinearGELU ops, want %d and %d", fused, n, l, norms, gelus)
	}
}
