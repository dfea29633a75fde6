package model

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
)

// stepMemory is the memory of one training step (forward and backward) of
// a shared bi-encoder on Q queries and P passages of L tokens (passages
// fill L), with an in-batch score loss as benchStep: retained is the heap
// the graph holds after the step (every op keeps its output between runs,
// so this is the step's working set, parameters excluded), peak the
// largest heap (live and not yet collected objects) seen during the step.
func stepMemory(tb testing.TB, cfg EncoderConfig, Q, P, L int, fused bool) (retained, peak uint64) {
	m, err := NewBiEncoder(cfg, true, 1)
	if err != nil {
		tb.Fatal(err)
	}
	m.Query.unfusedAttention = !fused
	before := heapAfterGC()
	pg := newPairGraphQP(tb, m, Q, P, L)
	if _, err := gorgonia.Grad(pg.loss, pg.binder.Nodes()...); err != nil {
		tb.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(pg.g)
	defer vm.Close()
	r := rand.New(rand.NewPCG(1, 2))
	qi, qm, qt := tinyBatch(r, Q, L, cfg.Vocab)
	pi, pm, pt := tinyBatch(r, P, L, cfg.Vocab)
	for i := range pm {
		pi[i], pm[i] = 1+r.IntN(cfg.Vocab-1), 1
	}
	if err := pg.qIn.Let(qi, qm, qt); err != nil {
		tb.Fatal(err)
	}
	if err := pg.pIn.Let(pi, pm, pt); err != nil {
		tb.Fatal(err)
	}
	peak = peakHeap(func() {
		if err := vm.RunAll(); err != nil {
			tb.Fatal(err)
		}
	})
	retained = heapAfterGC() - before
	runtime.KeepAlive(pg)
	return retained, peak
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // the second frees what sync.Pools held through the first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// peakHeap runs f and returns the largest heap (bytes of live and
// unswept objects) sampled every millisecond while it ran.
func peakHeap(f func()) uint64 {
	read := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	peak := read()
	done := make(chan struct{})
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	return max(peak, read())
}

// TestFusedAttentionMemory: a training step with the fused Attention
// retains less heap than with the unfused ops by what the unfused ops hold
// per attention layer, seven [B,heads,L,L] float32 tensors (scores,
// weights, dropout mask, dropped weights and the gradients of the last
// three), less the three [B*L,H] gradient slices the fused op adds to its
// joint gradient, within 5%.
func TestFusedAttentionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two small training graphs")
	}
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 100, Hidden: 32, Layers: 2, Heads: 4, FFN: 64, MaxPosition: 64, Dropout: 0.1}
	const Q, P, L = 4, 8, 64
	fused, _ := stepMemory(t, cfg, Q, P, L, true)
	unfused, _ := stepMemory(t, cfg, Q, P, L, false)
	perSeq := 7*cfg.Heads*L*L - 3*L*cfg.Hidden // floats per sequence and layer
	want := float64(cfg.Layers * (Q + P) * perSeq * 4)
	saved := float64(unfused) - float64(fused)
	t.Logf("retained heap: fused %.2f MB, unfused %.2f MB, saved %.2f MB, expected %.2f MB", mb(fused), mb(unfused), saved/1e6, want/1e6)
	if saved < 0.95*want || saved > 1.05*want {
		t.Errorf("fused attention saves %.0f bytes, want %.0f ± 5%%", saved, want)
	}
}

func mb(b uint64) float64 { return float64(b) / 1e6 }

// BenchmarkMiniLMStepMemory reports the memory of one training step of
// all-MiniLM-L6-v2's shape (H 384, 6 layers, 12 heads, FFN 1536, L 256,
// shared towers) on q queries and 2q passages, with the fused attention
// and with the unfused ops: retained-MB (the graph's working set after the
// step) and peak-heap-MB (the largest heap during it, garbage included).
// The unfused q32 step needs about 16 GB; run one sub-benchmark at a time,
// e.g. -bench 'MiniLMStepMemory/fused/q16' -benchtime 1x.
func BenchmarkMiniLMStepMemory(b *testing.B) {
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 30522, Hidden: 384, Layers: 6, Heads: 12, FFN: 1536, MaxPosition: 512, Dropout: 0.1}
	for _, fused := range []bool{true, false} {
		for _, q := range []int{16, 32} {
			name := fmt.Sprintf("unfused/q%d", q)
			if fused {
				name = fmt.Sprintf("fused/q%d", q)
			}
			b.Run(name, func(b *testing.B) {
				var retained, peak uint64
				for i := 0; i < b.N; i++ {
					retained, peak = stepMemory(b, cfg, q, 2*q, 256, fused)
				}
				b.ReportMetric(mb(retained), "retained-MB")
				b.ReportMetric(mb(peak), "peak-heap-MB")
			})
		}
	}
}
