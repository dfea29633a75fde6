package colbert

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/bench"
	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// TestColBERTGradCacheMemory measures one training step (task step, gradient clipping, AdamW)
// of the shipped recipe's model -- ColBERT from pretrained/all-MiniLM-L6-v2 (6 layers, H 384,
// dropout 0.1, 128 per token), queries of 32 tokens, passages cut to 180 -- on SciFact's first
// B training claims and 2B abstracts (one hard negative each), and logs the peak Go heap
// (sampled every millisecond) and the process's peak RSS (VmHWM). VmHWM never falls, so it runs
// one case per process, named by RAGTRAIN_COLBERT_MEM: "plain B" (Task) or "cached B M"
// (CachedTask, train.mini_batch_size = M); skipped without it:
//
//	RAGTRAIN_COLBERT_MEM="cached 32 8" GOMAXPROCS=1 nice -n 10 go test ./experiment/colbert -run ColBERTGradCacheMemory -v -timeout 30m
func TestColBERTGradCacheMemory(t *testing.T) {
	spec := strings.Fields(os.Getenv("RAGTRAIN_COLBERT_MEM"))
	if len(spec) == 0 {
		t.Skip("RAGTRAIN_COLBERT_MEM unset (a measurement, minutes per case)")
	}
	num := func(i int) int {
		if i >= len(spec) {
			t.Fatalf("RAGTRAIN_COLBERT_MEM=%q: want \"plain B\" or \"cached B M\"", os.Getenv("RAGTRAIN_COLBERT_MEM"))
		}
		n, err := strconv.Atoi(spec[i])
		if err != nil || n < 1 || n > 256 {
			t.Fatalf("RAGTRAIN_COLBERT_MEM=%q: %q is not a size in 1..256", os.Getenv("RAGTRAIN_COLBERT_MEM"), spec[i])
		}
		return n
	}
	B, M := num(1), 0
	if spec[0] == "cached" {
		M = num(2)
	} else if spec[0] != "plain" {
		t.Fatalf("RAGTRAIN_COLBERT_MEM=%q: want \"plain B\" or \"cached B M\"", os.Getenv("RAGTRAIN_COLBERT_MEM"))
	}
	dir := filepath.Join("..", "..", "pretrained", "all-MiniLM-L6-v2")
	tok, _, err := tokenize.LoadDir(dir)
	if err != nil {
		t.Skip(err)
	}
	cfg := cb.Config{Encoder: model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 384, Layers: 6, Heads: 12,
		FFN: 1536, MaxPosition: 512, Dropout: 0.1}, Dim: 128, QueryLength: 32, DocumentLength: 180}
	m, err := cb.New(cfg, 42)
	if err != nil {
		t.Fatal(err)
	}
	if err := experiment.InitFrom(m.Enc, dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join("..", "..", "datasets", "scifact")
	claims, abstracts := jsonlTexts(t, filepath.Join(data, "queries.jsonl"), B), jsonlTexts(t, filepath.Join(data, "corpus.jsonl"), 2*B)
	b := cb.Batch{Queries: claims, Passages: abstracts}
	task, err := cb.NewTrainTask(m, tok, cb.TaskOptions{B: B, N: 2 * B, Loss: cb.Loss{Name: "colbert_contrastive", Temperature: 1}, Seed: 1,
		Next: func(int) (cb.Batch, error) { return b, nil }, MiniBatch: M})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	runtime.GC()
	base := heapBytes()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // sample the live heap
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := heapBytes(); v > peak.Load() {
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
	loss, _, err := task.Step(0)
	if err != nil {
		t.Fatal(err)
	}
	trainer.ClipGlobalNorm(task.Params(), 1)
	trainer.NewAdamW(0.01).Step(task.Params(), 3e-5)
	task.AfterUpdate()
	secs := time.Since(start).Seconds()
	close(stop)
	<-done
	_, parts := task.Truncation()
	t.Logf("%s: B = %d claims, N = %d abstracts (%s), chunks of %d rows (0 = plain): loss %.4f; peak Go heap %.0f MiB (%.0f MiB before the step: model, graphs); peak RSS %.0f MiB; %.0f s for the step",
		spec[0], B, 2*B, parts[1].Count, M, loss, float64(peak.Load())/(1<<20), float64(base)/(1<<20), float64(bench.PeakRSSKiB())/(1<<10), secs)
}

// heapBytes is the live heap's bytes (runtime/metrics).
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// jsonlTexts returns the first n texts ("title" and "text" joined, as title_field = true) of a
// BEIR jsonl file.
func jsonlTexts(t *testing.T, path string, n int) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var out []string
	for sc.Scan() && len(out) < n {
		var r struct{ Title, Text string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, strings.TrimSpace(r.Title+" "+r.Text))
	}
	if len(out) < n {
		t.Fatalf("%s: %d texts, want %d", path, len(out), n)
	}
	return out
}
