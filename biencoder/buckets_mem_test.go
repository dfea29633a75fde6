package biencoder

import (
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// BenchmarkBucketGraphsMemory reports the peak Go heap, the process's peak RSS (VmHWM), the
// seconds per step and the graphs built of 4 training steps (AdamW) of a BucketedBiTask at
// MiniLM's shapes (H 384, 6 layers, 12 heads, FFN 1536, vocabulary 30522, shared towers, random
// weights, dropout 0.1) with 4 queries of at most 64 tokens and 4 passages of 256:
//
//   - one: every batch at (64, 256), the fixed-padding graph;
//   - two: batches alternating between (32, 256) and (64, 256), both graphs cached (no token
//     bound);
//   - bounded: the same batches with the default bound (the two graphs pad more tokens together
//     than the fixed graph), so each change of shape evicts a graph and builds one.
//
// and the seconds to build one more graph (without running it). VmHWM never falls, so run one
// case per process:
//
//	nice -n 19 go test ./biencoder -run '^$' -bench 'BucketGraphsMemory/two$' -benchtime 1x
func BenchmarkBucketGraphsMemory(b *testing.B) {
	for _, c := range []string{"one", "two", "bounded"} {
		b.Run(c, func(b *testing.B) { bucketGraphsMemory(b, c) })
	}
}

// lengthTokens is a batch of n random sequences of L positions whose longest has longest tokens.
func lengthTokens(r *rand.Rand, n, L, longest, vocab int) tokenize.Batch {
	bt := tokenize.Batch{B: n, L: L, IDs: make([]int, n*L), Mask: make([]float32, n*L), Types: make([]int, n*L)}
	for i := range n {
		k := longest
		if i > 0 {
			k = 2 + r.IntN(longest-1)
		}
		for j := range k {
			bt.IDs[i*L+j] = 4 + r.IntN(vocab-4)
			bt.Mask[i*L+j] = 1
		}
	}
	return bt
}

func bucketGraphsMemory(b *testing.B, c string) {
	const B, N, vocab = 4, 4, 30522
	lens := Lengths{64, 256}
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: vocab, Hidden: 384, Layers: 6, Heads: 12, FFN: 1536, MaxPosition: 512, Dropout: 0.1}
	m, err := model.NewBiEncoder(cfg, true, 42)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		b.Fatal(err)
	}
	opt := BucketOptions{MaxTokens: 1 << 30}
	if c == "bounded" {
		opt = BucketOptions{}
	}
	task, err := NewBucketedBiTask(m, nil, TaskOptions{B: B, N: N, Lengths: lens, Loss: loss, Seed: 1, Stream: StreamTrain, Buckets: opt})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	runtime.GC()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // sample the live heap
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	adam := trainer.NewAdamW(0.01)
	const steps = 4
	start := time.Now()
	for step := range steps {
		lq := 64
		if c != "one" && step%2 == 0 {
			lq = 20
		}
		q, p := lengthTokens(r, B, lens.Query, lq, vocab), lengthTokens(r, N, lens.Passage, 256, vocab)
		if _, _, err := task.StepTokens(step, PairBatch{}, q, p); err != nil {
			b.Fatal(err)
		}
		trainer.ClipGlobalNorm(task.Params(), 1)
		adam.Step(task.Params(), 1e-4)
		task.AfterUpdate()
	}
	sec := time.Since(start).Seconds() / steps
	close(stop)
	<-done
	hwm := vmHWM()
	// Building a graph (not running it), once more.
	t0 := time.Now()
	g, err := newBiGraph(m, B, N, Lengths{64, 256}, loss, false)
	if err != nil {
		b.Fatal(err)
	}
	build := time.Since(t0).Seconds()
	g.vm.Close()
	b.ReportMetric(build, "s/build")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(hwm)/(1<<10), "peak-RSS-MiB")
	b.ReportMetric(sec, "s/step")
	b.ReportMetric(float64(task.Built()), "graphs-built")
	b.Logf("%s: %d graphs built, cached %v: peak Go heap %.0f MiB, peak RSS %.0f MiB, %.2f s/step, %.3f s to build a graph",
		c, task.Built(), task.Cached(), float64(peak.Load())/(1<<20), float64(hwm)/(1<<10), sec, build)
	task.Close()
}
