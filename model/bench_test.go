package model

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
)

// benchStep measures one training step (forward and backward, no optimiser)
// of a shared bi-encoder on 32 queries and 64 passages (one positive and one
// negative per query) of L = 64 tokens, with an in-batch score loss.
func benchStep(b *testing.B, cfg EncoderConfig) {
	const Q, P, L = 32, 64, 64
	m, err := NewBiEncoder(cfg, true, 1)
	if err != nil {
		b.Fatal(err)
	}
	pg := newPairGraphQP(b, m, Q, P, L)
	grads, err := gorgonia.Grad(pg.loss, pg.binder.Nodes()...)
	if err != nil {
		b.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(pg.g)
	defer vm.Close()
	r := rand.New(rand.NewPCG(1, 2))
	qi, qm, qt := tinyBatch(r, Q, L, cfg.Vocab)
	pi, pm, pt := tinyBatch(r, P, L, cfg.Vocab)
	for i := range pm {
		pi[i], pm[i] = 1+r.IntN(cfg.Vocab-1), 1 // passages fill L, as most corpus texts do
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		m.SetRNG(rand.New(rand.NewPCG(uint64(i), 0)))
		if err := pg.qIn.Let(qi, qm, qt); err != nil {
			b.Fatal(err)
		}
		if err := pg.pIn.Let(pi, pm, pt); err != nil {
			b.Fatal(err)
		}
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(Q*b.N)/b.Elapsed().Seconds(), "pairs/s")
	// CPU time is steadier than wall time on a shared machine.
	b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
	_ = grads
}

func newPairGraphQP(b testing.TB, m *BiEncoder, Q, P, L int) *pairGraph {
	pg := &pairGraph{g: gorgonia.NewGraph()}
	pg.binder = NewBinder(pg.g)
	pg.qIn = NewInputs(pg.g, Q, L, "q")
	pg.pIn = NewInputs(pg.g, P, L, "p")
	var err error
	if pg.q, err = m.Query.Build(pg.binder, pg.qIn, true); err != nil {
		b.Fatal(err)
	}
	if pg.p, err = m.Passage.Build(pg.binder, pg.pIn, true); err != nil {
		b.Fatal(err)
	}
	s, err := MatMul(pg.q, pg.p, false, true)
	if err != nil {
		b.Fatal(err)
	}
	if pg.loss, err = weightedSum(s, 1); err != nil {
		b.Fatal(err)
	}
	return pg
}

func BenchmarkBowStep(b *testing.B) {
	benchStep(b, EncoderConfig{Encoder: EncoderBow, Vocab: 8000, Hidden: 128, Dropout: 0.1})
}

func BenchmarkTransformerStep(b *testing.B) {
	benchStep(b, EncoderConfig{Encoder: EncoderTransformer, Vocab: 8000, Hidden: 128, Layers: 2, Heads: 4, FFN: 512, MaxPosition: 64, Dropout: 0.1})
}
