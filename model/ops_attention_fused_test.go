package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// attnMask is a [B,L] mask with sequence lengths L, L-2, 1, 0, L/2, ...
// (cycled), and, with soft, weights 0.5 on the second sequence's keys (a
// mask that is not 0/1, which takes softmaxRow in float32).
func attnMask(B, L int, soft bool) *tensor.Dense {
	lens := []int{L, L - 2, 1, 0, L / 2}
	m := tensor.New(tensor.WithShape(B, L), tensor.Of(tensor.Float64))
	d := m.Data().([]float64)
	for b := 0; b < B; b++ {
		for j := 0; j < max(lens[b%len(lens)], 0); j++ {
			d[b*L+j] = 1
			if soft && b == 1 {
				d[b*L+j] = 0.5
			}
		}
	}
	return m
}

// attnRunResult is what one run of an attention graph computes: the output
// and the gradients of a weighted sum of it with respect to q, k and v.
type attnRunResult struct{ out, dq, dk, dv []float64 }

// runAttention builds q, k, v (of dtype dt) and mask, the fused or unfused
// attention and a weighted-sum loss, and runs the graph runs times, the
// dropout RNG reseeded with (seed, run) before each.
func runAttention(t *testing.T, dt tensor.Dtype, q, k, v, mask *tensor.Dense, o AttentionOptions, fused bool, runs int) []attnRunResult {
	t.Helper()
	conv := func(x *tensor.Dense) *tensor.Dense {
		if dt == tensor.Float32 {
			return toFloat32(x)
		}
		return x.Clone().(*tensor.Dense)
	}
	g := gorgonia.NewGraph()
	qn, kn, vn := leafIn(g, "q", conv(q)), leafIn(g, "k", conv(k)), leafIn(g, "v", conv(v))
	mn := leafIn(g, "mask", conv(mask))
	o.RNG = &RNG{}
	var a *gorgonia.Node
	var err error
	if fused {
		a, err = Attention(qn, kn, vn, mn, o)
	} else {
		a, err = unfusedAttention(qn, kn, vn, mn, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	return runAttnGraph(t, a, qn, kn, vn, runs, func(run int) { o.RNG.R = rand.New(rand.NewPCG(5, uint64(run))) })
}

// runAttnGraph differentiates a weighted sum of the attention output a with respect to its
// inputs q, k and v and runs the graph runs times, reseed(run) before each.
func runAttnGraph(t *testing.T, a, qn, kn, vn *gorgonia.Node, runs int, reseed func(run int)) []attnRunResult {
	t.Helper()
	var av gorgonia.Value
	gorgonia.Read(a, &av)
	loss, err := weightedSum(a, 7)
	if err != nil {
		t.Fatal(err)
	}
	grads, err := gorgonia.Grad(loss, qn, kn, vn)
	if err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(a.Graph())
	defer vm.Close()
	var res []attnRunResult
	for run := 0; run < runs; run++ {
		reseed(run)
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		res = append(res, attnRunResult{values(av), values(grads[0].Value()), values(grads[1].Value()), values(grads[2].Value())})
	}
	return res
}

// sameBits reports the first index where got and want differ in their bits.
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Fatalf("%s[%d] = %.17g, unfused %.17g", what, i, got[i], want[i])
		}
	}
}

// TestAttentionMatchesUnfused: the fused op's output and its gradients
// with respect to q, k and v equal those of AttentionScores, MaskedSoftmax,
// Dropout and AttentionContext bit for bit, over dtypes, dropout, causal
// masks, padding (with an empty sequence and a non-binary mask), odd L
// (blocks starting at odd dropout-mask elements), shapes where the blocks
// run in parallel and where one block's product is parallel itself; and
// over two runs (new dropout seeds each).
func TestAttentionMatchesUnfused(t *testing.T) {
	shapes := []struct{ B, L, heads, dh int }{
		{3, 5, 2, 4},   // small, serial
		{5, 9, 3, 8},   // odd L·L, parallel blocks
		{2, 40, 2, 16}, // rows of 40: the AVX softmax and GEMM kernels, ragged tiles
		{1, 130, 1, 128},
	}
	for _, sh := range shapes {
		r := rand.New(rand.NewPCG(uint64(sh.L), 1))
		H := sh.heads * sh.dh
		q, k, v := randDense(r, sh.B*sh.L, H), randDense(r, sh.B*sh.L, H), randDense(r, sh.B*sh.L, H)
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, causal := range []bool{false, true} {
				for _, p := range []float64{0, 0.2} {
					for _, soft := range []bool{false, true} {
						name := fmt.Sprintf("B%d L%d heads%d dh%d %v causal=%t dropout=%g soft=%t", sh.B, sh.L, sh.heads, sh.dh, dt, causal, p, soft)
						t.Run(name, func(t *testing.T) {
							o := AttentionOptions{L: sh.L, Heads: sh.heads, Scale: 1 / math.Sqrt(float64(sh.dh)), Causal: causal, Dropout: p}
							mask := attnMask(sh.B, sh.L, soft)
							got := runAttention(t, dt, q, k, v, mask, o, true, 2)
							want := runAttention(t, dt, q, k, v, mask, o, false, 2)
							for run := range got {
								g, w := got[run], want[run]
								sameBits(t, fmt.Sprintf("run %d out", run), g.out, w.out)
								sameBits(t, fmt.Sprintf("run %d dq", run), g.dq, w.dq)
								sameBits(t, fmt.Sprintf("run %d dk", run), g.dk, w.dk)
								sameBits(t, fmt.Sprintf("run %d dv", run), g.dv, w.dv)
							}
							if p > 0 {
								if fmt.Sprint(got[0].out) == fmt.Sprint(got[1].out) {
									t.Error("two runs with different seeds gave the same output")
								}
							}
						})
					}
				}
			}
		}
	}
}

// TestAttentionGradients checks the fused op's gradients with respect to
// q, k and v against finite differences in float64, with padding, causal
// masks and dropout (reseeded before every run).
func TestAttentionGradients(t *testing.T) {
	const B, L, heads, dh = 3, 4, 2, 3
	for _, c := range []struct {
		causal bool
		p      float64
	}{{false, 0}, {true, 0}, {false, 0.3}, {true, 0.3}} {
		r := rand.New(rand.NewPCG(2, 9))
		rng := &RNG{}
		mask := attnMask(B, L, false)
		gradCheck(t, gradCase{
			name:   fmt.Sprintf("Attention causal=%t dropout=%g", c.causal, c.p),
			leaves: []*tensor.Dense{randDense(r, B*L, heads*dh), randDense(r, B*L, heads*dh), randDense(r, B*L, heads*dh)},
			build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
				o := AttentionOptions{L: L, Heads: heads, Scale: 0.6, Causal: c.causal, Dropout: c.p, RNG: rng}
				return Attention(x[0], x[1], x[2], constNode(x[0], "mask", mask), o)
			}),
			before: func() { rng.R = rand.New(rand.NewPCG(4, 4)) },
		}, 1000, 1e-6)
	}
}

func TestAttentionShapeErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	x := leafIn(g, "x", randDense(rand.New(rand.NewPCG(1, 1)), 6, 4))
	y := leafIn(g, "y", randDense(rand.New(rand.NewPCG(1, 1)), 6, 2))
	m := leafIn(g, "m", attnMask(2, 3, false))
	m2 := leafIn(g, "m2", attnMask(3, 2, false))
	o := AttentionOptions{L: 3, Heads: 2, Scale: 1}
	if _, err := Attention(x, x, x, m, o); err != nil {
		t.Fatalf("good shapes: %v", err)
	}
	for name, c := range map[string]struct {
		q, k, v, m *gorgonia.Node
		o          AttentionOptions
	}{
		"v narrower":          {x, x, y, m, o},
		"mask [3,2]":          {x, x, x, m2, o},
		"L does not divide":   {x, x, x, m, AttentionOptions{L: 4, Heads: 2, Scale: 1}},
		"heads do not divide": {x, x, x, m, AttentionOptions{L: 3, Heads: 3, Scale: 1}},
		"dropout 1":           {x, x, x, m, AttentionOptions{L: 3, Heads: 2, Scale: 1, Dropout: 1, RNG: &RNG{}}},
		"dropout no RNG":      {x, x, x, m, AttentionOptions{L: 3, Heads: 2, Scale: 1, Dropout: 0.1}},
	} {
		if _, err := Attention(c.q, c.k, c.v, c.m, c.o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestDropMaskAt: a range of the mask starting anywhere (odd starts too)
// is that range of the whole mask.
func TestDropMaskAt(t *testing.T) {
	const n, seed = 37, 12345
	th := dropThreshold(0.4)
	whole := make([]float64, n)
	dropMask(whole, seed, th, 2.5)
	for start := 0; start < n; start++ {
		for end := start; end <= n; end++ {
			part := make([]float64, end-start)
			dropMaskAt(part, start, seed, th, 2.5)
			for i, v := range part {
				if v != whole[start+i] {
					t.Fatalf("dropMaskAt(start %d)[%d] = %v, dropMask %v", start, i, v, whole[start+i])
				}
			}
		}
	}
}

// towerRun is what one training run of a whole model computes: the loss,
// the outputs and the gradient of every bound parameter.
type towerRun struct {
	loss  float64
	outs  [][]float64
	grads [][]float64
}

// runModel runs a training graph (loss and reads of its outputs) twice,
// the RNG set by reseed(run) before each, and returns what each run gives.
func runModel(t *testing.T, loss *gorgonia.Node, outs []*gorgonia.Node, b *Binder, reseed func(run int)) []towerRun {
	t.Helper()
	return runModelShared(t, loss, outs, b, reseed, false)
}

// runModelShared is runModel, with the graph's buffers shared (ShareBuffers) when share is set.
func runModelShared(t *testing.T, loss *gorgonia.Node, outs []*gorgonia.Node, b *Binder, reseed func(run int), share bool) []towerRun {
	t.Helper()
	vals := make([]gorgonia.Value, len(outs))
	for i, o := range outs {
		gorgonia.Read(o, &vals[i])
	}
	grads, err := gorgonia.Grad(loss, b.Nodes()...)
	if err != nil {
		t.Fatal(err)
	}
	if share {
		ShareBuffers(loss.Graph())
	}
	vm := gorgonia.NewTapeMachine(loss.Graph())
	defer vm.Close()
	var res []towerRun
	for run := 0; run < 2; run++ {
		reseed(run)
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		tr := towerRun{loss: scalar(t, loss)}
		for _, v := range vals {
			tr.outs = append(tr.outs, values(v))
		}
		for _, g := range grads {
			tr.grads = append(tr.grads, values(g.Value()))
		}
		res = append(res, tr)
	}
	return res
}

// countOps counts the nodes of g whose op name starts with prefix (not
// counting gradient ops).
func countOps(g *gorgonia.ExprGraph, prefix string) int {
	n := 0
	for _, nd := range g.AllNodes() {
		if op := nd.Op(); op != nil && strings.HasPrefix(op.String(), prefix) && !strings.Contains(op.String(), "Grad") {
			n++
		}
	}
	return n
}

// wantOps checks that g holds n attention ops, fused or unfused.
func wantOps(t *testing.T, g *gorgonia.ExprGraph, fused bool, n int) {
	t.Helper()
	f, u := countOps(g, "Attention{"), countOps(g, "MaskedSoftmax{")
	if fused && (f != n || u != 0) || !fused && (f != 0 || u != n) {
		t.Fatalf("fused=%t: graph has %d fused and %d unfused attention ops, want %d", fused, f, u, n)
	}
}

func sameRuns(t *testing.T, got, want []towerRun, names []string) {
	t.Helper()
	for run := range got {
		g, w := got[run], want[run]
		sameBits(t, fmt.Sprintf("run %d loss", run), []float64{g.loss}, []float64{w.loss})
		for i := range g.outs {
			sameBits(t, fmt.Sprintf("run %d output %d", run, i), g.outs[i], w.outs[i])
		}
		for i := range g.grads {
			sameBits(t, fmt.Sprintf("run %d d/d %s", run, names[i]), g.grads[i], w.grads[i])
		}
	}
}

func boundNames(b *Binder) []string {
	var names []string
	for _, bd := range b.Bound() {
		names = append(names, bd.Param.Name)
	}
	return names
}

// TestBiEncoderFusedAttentionMatchesUnfused: a training step of a BERT
// bi-encoder (both towers, padding, dropout) gives the same loss, pooled
// vectors and parameter gradients bit for bit with the fused Attention as
// with the unfused ops, in float32 and float64, causal or not, shared or
// separate towers.
func TestBiEncoderFusedAttentionMatchesUnfused(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, c := range []struct {
			shared, causal bool
			pooling        string
			L              int
		}{{true, false, PoolingMean, 6}, {false, true, PoolingCLS, 9}, {true, true, PoolingMean, 12}} {
			name := fmt.Sprintf("%v shared=%t causal=%t L=%d", dt, c.shared, c.causal, c.L)
			t.Run(name, func(t *testing.T) {
				cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 23, Hidden: 16, Layers: 2, Heads: 2, FFN: 24, MaxPosition: 16,
					Dropout: 0.15, Causal: c.causal, Pooling: c.pooling}
				run := func(fused bool) ([]towerRun, []string) {
					m, err := newBiEncoder(cfg, c.shared, 11, dt)
					if err != nil {
						t.Fatal(err)
					}
					m.Query.unfusedAttention, m.Passage.unfusedAttention = !fused, !fused
					const B = 4
					pg := newPairGraph(t, m, B, c.L, true, sumLoss)
					r := rand.New(rand.NewPCG(3, 3))
					qi, qm, qt := tinyBatch(r, B, c.L, cfg.Vocab)
					pi, pm, pt := tinyBatch(r, B, c.L, cfg.Vocab)
					for i := range pm[:c.L] { // one passage fills L
						pi[i], pm[i] = 1+r.IntN(cfg.Vocab-1), 1
					}
					if err := pg.qIn.Let(qi, qm, qt); err != nil {
						t.Fatal(err)
					}
					if err := pg.pIn.Let(pi, pm, pt); err != nil {
						t.Fatal(err)
					}
					res := runModel(t, pg.loss, []*gorgonia.Node{pg.q, pg.p}, pg.binder, func(run int) {
						m.SetRNG(rand.New(rand.NewPCG(8, uint64(run))))
					})
					wantOps(t, pg.g, fused, 2*cfg.Layers)
					return res, boundNames(pg.binder)
				}
				got, names := run(true)
				want, _ := run(false)
				sameRuns(t, got, want, names)
			})
		}
	}
}

// TestReaderFusedAttentionMatchesUnfused is the same check for a GPT-2
// reader's training step (causal, pre-LN, dropout).
func TestReaderFusedAttentionMatchesUnfused(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			run := func(fused bool) ([]towerRun, []string) {
				return readerStep(t, dt, false, func(r *Reader) { r.Tower.unfusedAttention = !fused }, func(rg *readerGraph, cfg EncoderConfig) {
					wantOps(t, rg.logp.Graph(), fused, cfg.Layers)
				})
			}
			got, names := run(true)
			want, _ := run(false)
			sameRuns(t, got, want, names)
		})
	}
}
