package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestShareBuffersTrainingMatches: a training step with shared buffers (ShareBuffers) gives the
// loss, outputs and parameter gradients of the same step without, bit for bit, twice in a row
// (the second run reuses the buffers of the first), in float32 and float64: a BERT bi-encoder
// (shared or separate towers, dropout, padding, causal or not), a cross-encoder and the GPT-2
// reader.
func TestShareBuffersTrainingMatches(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, c := range []struct {
			shared, causal bool
			pooling        string
		}{{true, false, PoolingMean}, {false, true, PoolingCLS}} {
			t.Run(fmt.Sprintf("bi %v shared=%t causal=%t", dt, c.shared, c.causal), func(t *testing.T) {
				cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 23, Hidden: 16, Layers: 2, Heads: 2, FFN: 24, MaxPosition: 16,
					Dropout: 0.15, Causal: c.causal, Pooling: c.pooling}
				const B, L = 4, 7
				run := func(share bool) ([]towerRun, []string) {
					m, err := newBiEncoder(cfg, c.shared, 11, dt)
					if err != nil {
						t.Fatal(err)
					}
					pg := newPairGraph(t, m, B, L, true, sumLoss)
					r := rand.New(rand.NewPCG(3, 3))
					qi, qm, qt := tinyBatch(r, B, L, cfg.Vocab)
					pi, pm, pt := tinyBatch(r, B, L, cfg.Vocab)
					if err := pg.qIn.Let(qi, qm, qt); err != nil {
						t.Fatal(err)
					}
					if err := pg.pIn.Let(pi, pm, pt); err != nil {
						t.Fatal(err)
					}
					res := runModelShared(t, pg.loss, []*gorgonia.Node{pg.q, pg.p}, pg.binder, func(run int) {
						m.SetRNG(rand.New(rand.NewPCG(8, uint64(run))))
					}, share)
					return res, boundNames(pg.binder)
				}
				got, names := run(true)
				want, _ := run(false)
				sameRuns(t, got, want, names)
			})
		}
		t.Run(fmt.Sprintf("cross %v", dt), func(t *testing.T) {
			run := func(share bool) ([]towerRun, []string) { return crossEncoderStep(t, dt, share, nil) }
			got, names := run(true)
			want, _ := run(false)
			sameRuns(t, got, want, names)
		})
		t.Run(fmt.Sprintf("reader %v", dt), func(t *testing.T) {
			run := func(share bool) ([]towerRun, []string) { return readerStep(t, dt, share, nil, nil) }
			got, names := run(true)
			want, _ := run(false)
			sameRuns(t, got, want, names)
		})
	}
}

// inferenceGraph builds t's inference graph on a B x L batch, shared or not, and returns it with
// its output after one run on the batch.
func inferenceGraph(t *testing.T, tw *Tower, B, L int, share bool, ids []int, mask []float32, types []int) (*gorgonia.ExprGraph, []float64) {
	t.Helper()
	g := gorgonia.NewGraph()
	in := newInputs(g, B, L, "x", tw.dt)
	out, err := tw.Build(NewBinder(g), in, false)
	if err != nil {
		t.Fatal(err)
	}
	if share {
		ShareBuffers(g, out)
	}
	if err := in.Let(ids, mask, types); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	var v []float64
	for range 2 {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		v = values(out.Value())
	}
	return g, v
}

// arenaBytes is what the arena of g has allocated (0 when its buffers are not shared).
func arenaBytes(g *gorgonia.ExprGraph) int {
	for _, n := range g.AllNodes() {
		if o, ok := n.Op().(*customOp); ok && o.ar != nil {
			return o.ar.bytes
		}
	}
	return 0
}

// TestShareBuffersInference: an inference graph with shared buffers encodes as one without, bit
// for bit, and its arena holds as much for 4 layers as for 1 (each layer's activations die as
// the next layer consumes them): the memory of an encoder does not grow with its depth.
func TestShareBuffersInference(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			held := map[int]int{}
			for _, layers := range []int{1, 4} {
				cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 23, Hidden: 16, Layers: layers, Heads: 2, FFN: 24, MaxPosition: 16, Pooling: PoolingMean}
				m, err := newBiEncoder(cfg, true, 11, dt)
				if err != nil {
					t.Fatal(err)
				}
				const B, L = 4, 7
				ids, mask, types := tinyBatch(rand.New(rand.NewPCG(3, 3)), B, L, cfg.Vocab)
				g, got := inferenceGraph(t, m.Query, B, L, true, ids, mask, types)
				_, want := inferenceGraph(t, m.Query, B, L, false, ids, mask, types)
				sameBits(t, fmt.Sprintf("%d layers: encoding", layers), got, want)
				held[layers] = arenaBytes(g)
			}
			if held[1] == 0 || held[4] != held[1] {
				t.Errorf("arena of an inference graph: %d bytes with 1 layer, %d with 4; want equal and nonzero", held[1], held[4])
			}
		})
	}
}

// TestShareBuffersRunnerMatches: an EncoderRunner (which shares its buffers) over several
// batches gives the vectors of an unshared graph run batch by batch.
func TestShareBuffersRunnerMatches(t *testing.T) {
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 23, Hidden: 16, Layers: 2, Heads: 2, FFN: 24, MaxPosition: 16, Pooling: PoolingMean}
	m, err := NewBiEncoder(cfg, true, 11)
	if err != nil {
		t.Fatal(err)
	}
	const B, L, n = 4, 7, 10
	ids, mask, types := tinyBatch(rand.New(rand.NewPCG(5, 5)), n, L, cfg.Vocab)
	r, err := NewEncoderRunner(m.Passage, B, L)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Encode(ids, mask, types, n)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += B {
		rows := min(B, n-start)
		bi, bm, bt := make([]int, B*L), make([]float32, B*L), make([]int, B*L)
		copy(bi, ids[start*L:(start+rows)*L])
		copy(bm, mask[start*L:(start+rows)*L])
		copy(bt, types[start*L:(start+rows)*L])
		_, want := inferenceGraph(t, m.Passage, B, L, false, bi, bm, bt)
		h := cfg.Hidden
		g := make([]float64, rows*h)
		for i := range g {
			g[i] = float64(got[start*h+i])
		}
		sameBits(t, fmt.Sprintf("rows %d..%d", start, start+rows-1), g, want[:rows*h])
	}
}

// crossEncoderStep runs a tiny cross-encoder's scoring step (B 3, L 8, CLS pooling, dropout 0.1)
// twice through runModelShared and returns the runs and the bound parameter names; tweak (may
// be nil) adjusts the model before its graph is built.
func crossEncoderStep(t *testing.T, dt tensor.Dtype, share bool, tweak func(*CrossEncoder)) ([]towerRun, []string) {
	t.Helper()
	cfg := tinyTransformer()
	cfg.Pooling, cfg.Dropout = PoolingCLS, 0.1
	const B, L = 3, 8
	m, err := newCrossEncoder(cfg, 5, dt)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(m)
	}
	b, in, s := scoreGraph(t, m, B, L, true)
	loss, err := weightedSum(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	ids, mask, types := pairBatchFixture(rand.New(rand.NewPCG(2, 2)), B, L, cfg.Vocab)
	if err := in.Let(ids, mask, types); err != nil {
		t.Fatal(err)
	}
	res := runModelShared(t, loss, []*gorgonia.Node{s}, b, func(run int) {
		m.SetRNG(rand.New(rand.NewPCG(6, uint64(run))))
	}, share)
	return res, boundNames(b)
}

// readerStep runs a tiny GPT-2 reader's training step (B 2, L 5, H 12, 3 heads, dropout 0.1)
// twice through runModelShared; tweak (may be nil) adjusts the reader first and check (may be
// nil) inspects its graph.
func readerStep(t *testing.T, dt tensor.Dtype, share bool, tweak func(*Reader), check func(*readerGraph, EncoderConfig)) ([]towerRun, []string) {
	t.Helper()
	cfg := tinyReaderConfig()
	cfg.Dropout, cfg.Hidden, cfg.Heads = 0.1, 12, 3
	r, err := newReader(cfg, 3, dt)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(r)
	}
	const B, L = 2, 5
	rg := newReaderGraph(t, r, B, L, 6, true)
	ids := []int{2, 3, 4, 5, 0, 2, 6, 7, 0, 0}
	mask := []float32{1, 1, 1, 1, 0, 1, 1, 1, 0, 0}
	if err := rg.in.Let(ids, mask, nil); err != nil {
		t.Fatal(err)
	}
	if err := rg.tg.Let([]int{0, 1, 2, 5, 6, -1}, []int{3, 4, 5, 6, 7, 0}); err != nil {
		t.Fatal(err)
	}
	res := runModelShared(t, rg.total, []*gorgonia.Node{rg.logp}, rg.b, func(run int) {
		r.SetRNG(rand.New(rand.NewPCG(8, uint64(run))))
	}, share)
	if check != nil {
		check(rg, cfg)
	}
	return res, boundNames(rg.b)
}
