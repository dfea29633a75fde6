package biencoder

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// BenchmarkGradCacheMemory reports the peak Go heap (sampled every millisecond) and the
// process's peak RSS (VmHWM) of two training steps of the Transformer of
// recipes/retriever-cranfield-transformer.toml (2 layers, H = 128, 4 heads, FFN 512, L = 64,
// vocabulary 8000, shared towers, dropout 0.1, one hard negative: N queries, 2N passages) with
// AdamW, for N = 32, 128, 256, cached (train.mini_batch_size = 32) and uncached. VmHWM never
// falls, so run one case per process:
//
//	nice -n 10 go test ./biencoder -run '^$' -bench 'GradCacheMemory/N=256/mini=32$' -benchtime 1x
func BenchmarkGradCacheMemory(b *testing.B) {
	for _, n := range []int{32, 128, 256} {
		for _, mini := range []int{0, 32} {
			b.Run(fmt.Sprintf("N=%d/mini=%d", n, mini), func(b *testing.B) { gradCacheMemory(b, n, mini) })
		}
	}
}

func gradCacheMemory(b *testing.B, n, mini int) {
	const L, vocab = 64, 8000
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: vocab, Hidden: 128, Layers: 2, Heads: 4, FFN: 512, MaxPosition: 512, Dropout: 0.1}
	m, err := model.NewBiEncoder(cfg, true, 42)
	if err != nil {
		b.Fatal(err)
	}
	loss, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	q, p := randomBatch(r, n, L, vocab), randomBatch(r, 2*n, L, vocab)
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
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
	start := time.Now()
	if mini == 0 {
		s, err := NewBiStep(m, BiStepOptions{B: n, N: 2 * n, Lengths: Lengths{Query: L, Passage: L}, Temperature: 0.05, Similarity: losses.Cosine, WeightDecay: 0.01, GradClip: 1, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 2 {
			if _, err := s.Step(i, q, p, nil, 1e-3); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
	} else {
		task, err := NewCachedBiTask(m, nil, TaskOptions{B: n, N: 2 * n, MiniBatch: mini, Lengths: Lengths{Query: L, Passage: L}, Loss: loss, Seed: 1, Stream: StreamTrain})
		if err != nil {
			b.Fatal(err)
		}
		opt := trainer.NewAdamW(0.01)
		for i := range 2 {
			if _, _, err := task.StepTokens(i, PairBatch{}, q, p); err != nil {
				b.Fatal(err)
			}
			trainer.ClipGlobalNorm(task.Params(), 1)
			opt.Step(task.Params(), 1e-3)
			task.AfterUpdate()
		}
		task.Close()
	}
	close(stop)
	<-done
	hwm := vmHWM()
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(hwm)/(1<<10), "peak-RSS-MiB")
	b.ReportMetric(time.Since(start).Seconds()/2, "s/step")
	b.Logf("N=%d queries, %d passages, L=%d, mini_batch_size=%d: peak Go heap %.0f MiB, peak RSS %.0f MiB, %.1f s/step",
		n, 2*n, L, mini, float64(peak.Load())/(1<<20), float64(hwm)/(1<<10), time.Since(start).Seconds()/2)
}

// vmHWM is the process's peak resident set in KiB (Linux), 0 where unknown.
func vmHWM() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
