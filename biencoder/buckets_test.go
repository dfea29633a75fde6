package biencoder

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// bucketCfg is the small Transformer of the bucketed-training tests (positions up to 128).
func bucketCfg(tok *tokenize.Tokenizer, pooling string, dropout float64) model.EncoderConfig {
	return model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16, Layers: 2, Heads: 2, FFN: 32,
		MaxPosition: 128, Pooling: pooling, Dropout: dropout}
}

// lengthBatch is a batch of B queries of qn[i] words and N passages of pn[j] words (one token a
// word), candidate mask keeping every passage but passage 0 for query 1.
func lengthBatch(t testing.TB, tok *tokenize.Tokenizer, qn, pn []int, seed uint64) PairBatch {
	mask := make([]float32, len(qn)*len(pn))
	for i := range mask {
		mask[i] = 1
	}
	mask[1*len(pn)+0] = 0
	return PairBatch{Queries: wordTexts(t, tok, qn, seed), Passages: wordTexts(t, tok, pn, seed+100), Mask: mask}
}

// TestBucketedBiTaskMatchesFixed runs one step of a batch whose queries (at most 12 of 64
// tokens) and passages (at most 40 of 96) fit the buckets 32 and 64: the bucketed graph of shape
// (32, 64) gives the loss and every parameter gradient of BiTask padding to (64, 96), within
// 1e-6 (loss) and 1e-6 times the largest gradient (padding is masked out; only the order of the
// float32 sums over positions differs),
// for mean and [CLS] pooling with a candidate mask; the truncation counts are BiTask's.
func TestBucketedBiTaskMatchesFixed(t *testing.T) {
	tok := bertTokenizer(t)
	lens := Lengths{Query: 64, Passage: 96}
	// 4 queries of 2..10 words, 8 passages of 5..38 words: the longest query has 12 tokens with
	// [CLS] and [SEP], the longest passage 40; one passage of 120 words is cut to 96.
	pb := lengthBatch(t, tok, []int{3, 10, 2, 7}, []int{20, 38, 5, 14, 9, 30, 11, 25}, 7)
	long := lengthBatch(t, tok, []int{3, 10, 2, 7}, []int{20, 38, 5, 120, 9, 30, 11, 25}, 7)
	infonce, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	for _, pooling := range []string{"mean", "cls"} {
		t.Run(pooling, func(t *testing.T) {
			newModel := func() *model.BiEncoder {
				m, err := model.NewBiEncoder(bucketCfg(tok, pooling, 0), true, 5)
				if err != nil {
					t.Fatal(err)
				}
				randomize(m, 0.3, 5)
				return m
			}
			batch := pb
			next := func(int) (PairBatch, error) { return batch, nil }
			fixed, err := NewBiTask(newModel(), tok, TaskOptions{B: 4, N: 8, Lengths: lens, Loss: infonce, Masked: true, Seed: 1, Stream: StreamTrain, Next: next})
			if err != nil {
				t.Fatal(err)
			}
			defer fixed.Close()
			bucketed, err := NewBucketedBiTask(newModel(), tok, TaskOptions{B: 4, N: 8, Lengths: lens, Loss: infonce, Masked: true, Seed: 1, Stream: StreamTrain, Next: next})
			if err != nil {
				t.Fatal(err)
			}
			defer bucketed.Close()
			wantLoss, _, err := fixed.Step(0)
			if err != nil {
				t.Fatal(err)
			}
			loss, n, err := bucketed.Step(0)
			if err != nil {
				t.Fatal(err)
			}
			if got := bucketed.Cached(); !slices.Equal(got, []Lengths{{32, 64}}) {
				t.Fatalf("cached shapes %v, want [{32 64}]", got)
			}
			if n != 4 || loss == 0 || math.Abs(loss-wantLoss) > 1e-6 {
				t.Errorf("bucketed loss %.9g (%d examples), fixed padding %.9g", loss, n, wantLoss)
			}
			fp, bp := fixed.Params(), bucketed.Params()
			if len(fp) != len(bp) {
				t.Fatalf("%d parameters bucketed, %d fixed", len(bp), len(fp))
			}
			d, gmax, nonzero := 0.0, 0.0, 0
			for i := range fp {
				gmax = max(gmax, maxAbsDiff(fp[i].Grad, make([]float32, len(fp[i].Grad))))
				if fp[i].Name != bp[i].Name {
					t.Fatalf("parameter %d: %s bucketed, %s fixed", i, bp[i].Name, fp[i].Name)
				}
				d = max(d, maxAbsDiff(fp[i].Grad, bp[i].Grad))
				if slices.ContainsFunc(bp[i].Grad, func(g float32) bool { return g != 0 }) {
					nonzero++
				}
			}
			if d > 1e-6*gmax || nonzero < len(bp)/2 {
				t.Errorf("gradients differ by %.3g, largest gradient %.3g (%d of %d parameters with a nonzero gradient)", d, gmax, nonzero, len(bp))
			}
			t.Logf("loss %.6f; |loss difference| %.3g, max |gradient difference| %.3g (largest |gradient| %.3g)", loss, math.Abs(loss-wantLoss), d, gmax)

			// A batch with a passage cut to 96 tokens runs at (32, 96), and counts its cut. The
			// graphs of (32, 64) and (32, 96) pad 640 and 896 tokens, more together than fixed
			// padding's 1024: the first is evicted.
			fixed.AfterUpdate()
			bucketed.AfterUpdate()
			batch = long
			if _, _, err := fixed.Step(1); err != nil {
				t.Fatal(err)
			}
			if _, _, err := bucketed.Step(1); err != nil {
				t.Fatal(err)
			}
			if got := bucketed.Cached(); !slices.Equal(got, []Lengths{{32, 96}}) || bucketed.Built() != 2 {
				t.Errorf("cached shapes %v (%d built), want [{32 96}] (2)", got, bucketed.Built())
			}
			report := func(tr tokenize.TruncReporter) string {
				var out strings.Builder
				L, parts := tr.Truncation()
				tokenize.ReportTruncation(&out, "train", L, parts...)
				return out.String()
			}
			if got, want := report(bucketed), report(fixed); got != want || !strings.Contains(want, "passages to 96 tokens 1 of 16 cut") {
				t.Errorf("truncation report %q, fixed padding's %q", got, want)
			}
		})
	}
}

// TestBucketedBiTaskGraphCache runs batches of several lengths (bow encoder, queries and
// passages up to 128 tokens): a graph is built once per distinct (Lq, Lp) shape, not per batch;
// with MaxGraphs 2 the least recently used graph is evicted (and built again when its shape
// returns); the default token bound keeps graphs padding no more tokens together than the one
// fixed-padding graph.
func TestBucketedBiTaskGraphCache(t *testing.T) {
	tok := bertTokenizer(t)
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 8}, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	infonce, err := infoNCE(0.05, losses.Dot)
	if err != nil {
		t.Fatal(err)
	}
	// Words per text -> tokens with [CLS] and [SEP] -> bucket: 10 -> 12 -> 32, 40 -> 42 -> 64,
	// 100 -> 102 -> 128.
	shapes := map[string][2][]int{
		"A": {{10, 5}, {10, 3, 7}},     // (32, 32)
		"B": {{10, 5}, {40, 3, 7}},     // (32, 64)
		"C": {{40, 5}, {100, 3, 7}},    // (64, 128)
		"D": {{100, 5}, {10, 40, 100}}, // (128, 128)
	}
	want := map[string]Lengths{"A": {32, 32}, "B": {32, 64}, "C": {64, 128}, "D": {128, 128}}
	run := func(opt BucketOptions, seq string) *BucketedBiTask {
		t.Helper()
		var batches []PairBatch
		for i, c := range seq {
			s := shapes[string(c)]
			batches = append(batches, PairBatch{Queries: wordTexts(t, tok, s[0], uint64(i)), Passages: wordTexts(t, tok, s[1], uint64(i+50))})
		}
		task, err := NewBucketedBiTask(m, tok, TaskOptions{B: 2, N: 3, Lengths: Lengths{128, 128}, Loss: infonce, Seed: 1, Stream: StreamTrain, Next: func(step int) (PairBatch, error) { return batches[step], nil }, Buckets: opt})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range seq {
			if _, _, err := task.Step(i); err != nil {
				t.Fatal(err)
			}
			task.AfterUpdate()
			if got := task.Cached(); got[len(got)-1] != want[string(c)] {
				t.Fatalf("step %d (%c): ran at %v, want %v", i, c, got[len(got)-1], want[string(c)])
			}
		}
		return task
	}
	cases := []struct {
		name   string
		opt    BucketOptions
		seq    string
		built  int
		cached []Lengths // least recently used first
	}{
		{"one per shape", BucketOptions{MaxTokens: 1 << 20}, "AABABBCACB", 3, []Lengths{{32, 32}, {64, 128}, {32, 64}}},
		{"LRU of 2", BucketOptions{MaxGraphs: 2, MaxTokens: 1 << 20}, "ABACAB", 4, []Lengths{{32, 32}, {32, 64}}},
		// Fixed padding pads 2·128 + 3·128 = 640 tokens: A (160) and B (256) fit together, C
		// (512) alone, D (640) alone: every change of shape after B builds a graph.
		{"token bound", BucketOptions{}, "ABABCAD", 5, []Lengths{{128, 128}}},
		{"token bound keeps A, B", BucketOptions{}, "ABABBA", 2, []Lengths{{32, 64}, {32, 32}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := run(c.opt, c.seq)
			defer task.Close()
			if task.Built() != c.built || !slices.Equal(task.Cached(), c.cached) {
				t.Errorf("%s: %d graphs built, cached %v; want %d, %v", c.seq, task.Built(), task.Cached(), c.built, c.cached)
			}
		})
	}
}

// trainSteps trains m for steps [from, to) with the bucketed task over batches (varying
// lengths), AdamW and clipping as trainer.Run does, starting from the optimizer state st (nil
// for a fresh one), and returns the optimizer.
func trainSteps(t *testing.T, m *model.BiEncoder, tok *tokenize.Tokenizer, batches []PairBatch, from, to int, st *trainer.OptimizerState) *trainer.AdamW {
	t.Helper()
	infonce, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewBucketedBiTask(m, tok, TaskOptions{B: 2, N: 4, Lengths: Lengths{64, 96}, Loss: infonce, Seed: 9, Stream: StreamTrain, Next: func(step int) (PairBatch, error) { return batches[step], nil }, Buckets: BucketOptions{MaxGraphs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	opt := trainer.NewAdamW(0.01)
	if st != nil {
		if err := opt.SetState(*st); err != nil {
			t.Fatal(err)
		}
	}
	for step := from; step < to; step++ {
		if _, _, err := task.Step(step); err != nil {
			t.Fatal(err)
		}
		trainer.ClipGlobalNorm(task.Params(), 1)
		opt.Step(task.Params(), 1e-2)
		task.AfterUpdate()
	}
	return opt
}

// TestBucketedBiTaskDeterministic trains 6 steps over batches of three shapes (dropout 0.1,
// MaxGraphs 2, so graphs are evicted and built again): two runs from the same seed end with
// bit-identical parameters, and so does a run stopped after 3 steps and resumed from its
// parameters and AdamW state (one per parameter name) in a new task; training did change the
// parameters.
func TestBucketedBiTaskDeterministic(t *testing.T) {
	tok := bertTokenizer(t)
	var batches []PairBatch
	for i, n := range [][2][]int{{{3, 5}, {20, 8, 3, 4}}, {{40, 5}, {20, 8, 3, 70}}, {{3, 5}, {50, 8, 3, 4}},
		{{3, 5}, {20, 8, 3, 4}}, {{40, 5}, {20, 8, 3, 70}}, {{3, 5}, {50, 8, 3, 4}}} {
		batches = append(batches, PairBatch{Queries: wordTexts(t, tok, n[0], uint64(i)), Passages: wordTexts(t, tok, n[1], uint64(i+9))})
	}
	newModel := func() *model.BiEncoder {
		m, err := model.NewBiEncoder(bucketCfg(tok, "mean", 0.1), false, 11)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	values := func(m *model.BiEncoder) [][]float32 {
		var out [][]float32
		for _, p := range m.Params() {
			out = append(out, slices.Clone(p.Value.Data().([]float32)))
		}
		return out
	}
	init := values(newModel())
	a, b := newModel(), newModel()
	trainSteps(t, a, tok, batches, 0, 6, nil)
	trainSteps(t, b, tok, batches, 0, 6, nil)
	c := newModel()
	st := trainSteps(t, c, tok, batches, 0, 3, nil).State()
	// One AdamW state per parameter name, whatever graph ran: the moments carry across buckets.
	if n := len(c.Params()); len(st.M) != n || st.Step != 3 {
		t.Errorf("AdamW after 3 steps: %d first moments, step %d; want %d (one per parameter), 3", len(st.M), st.Step, n)
	}
	trainSteps(t, c, tok, batches, 3, 6, &st)
	va, vb, vc := values(a), values(b), values(c)
	changed := 0
	for i := range va {
		if !slices.Equal(va[i], vb[i]) || !slices.Equal(va[i], vc[i]) {
			t.Errorf("parameter %d: differs between runs (%.3g twice from step 0, %.3g resumed at step 3)", i, maxAbsDiff(va[i], vb[i]), maxAbsDiff(va[i], vc[i]))
		}
		if !slices.Equal(va[i], init[i]) {
			changed++
		}
	}
	if changed != len(va) {
		t.Errorf("%d of %d parameters changed in training", changed, len(va))
	}
}

// BenchmarkBucketedStep times one training step (forward, backward, AdamW) of the small
// Transformer of recipes/retriever-cranfield-transformer.toml (2 layers, H 128, 4 heads, FFN 512,
// random weights) on 16 queries of 10 tokens and 32 passages of 40, with every batch padded to
// the maximum lengths 64 / 128 (fixed) or to its bucket 32 / 64 (bucketed):
//
//	nice -n 19 go test ./biencoder -run '^$' -bench BucketedStep
func BenchmarkBucketedStep(b *testing.B) {
	tok := bertTokenizer(b)
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 128, Layers: 2, Heads: 4, FFN: 512,
		MaxPosition: 128, Dropout: 0.1}
	r := rand.New(rand.NewPCG(3, 4))
	qn, pn := make([]int, 16), make([]int, 32)
	for i := range qn {
		qn[i] = 4 + r.IntN(5) // 6..10 tokens with [CLS] and [SEP]
	}
	for i := range pn {
		pn[i] = 20 + r.IntN(19) // 22..40
	}
	pb := PairBatch{Queries: wordTexts(b, tok, qn, 1), Passages: wordTexts(b, tok, pn, 2)}
	infonce, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		b.Fatal(err)
	}
	lens := Lengths{64, 128}
	next := func(int) (PairBatch, error) { return pb, nil }
	for _, bucketed := range []bool{false, true} {
		name := "fixed"
		if bucketed {
			name = "bucketed"
		}
		b.Run(name, func(b *testing.B) {
			m, err := model.NewBiEncoder(cfg, true, 1)
			if err != nil {
				b.Fatal(err)
			}
			var task interface {
				trainer.Task
				Close()
			}
			if bucketed {
				task, err = NewBucketedBiTask(m, tok, TaskOptions{B: 16, N: 32, Lengths: lens, Loss: infonce, Seed: 1, Stream: StreamTrain, Next: next})
			} else {
				task, err = NewBiTask(m, tok, TaskOptions{B: 16, N: 32, Lengths: lens, Loss: infonce, Seed: 1, Stream: StreamTrain, Next: next})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer task.Close()
			opt := trainer.NewAdamW(0.01)
			step := func(i int) {
				if _, _, err := task.Step(i); err != nil {
					b.Fatal(err)
				}
				trainer.ClipGlobalNorm(task.Params(), 1)
				opt.Step(task.Params(), 1e-4)
				task.AfterUpdate()
			}
			step(0) // builds the bucketed graph
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				step(i + 1)
			}
		})
	}
}

// TestCachedBiTaskDynamic runs one gradient-caching step (chunks of 2 rows) of the batch of
// TestBucketedBiTaskMatchesFixed with Dynamic: its chunks pad to 32 (queries) and 32 or 64
// (passages) and run through 3 pairs of graphs besides the two of the maximum lengths; the loss
// and every summed gradient are those of fixed padding (BiTask) within 1e-6 and 1e-6 times the
// largest gradient. With dropout, a step succeeds, so each chunk's re-forward replayed its
// cached embedding bit for bit.
func TestCachedBiTaskDynamic(t *testing.T) {
	tok := bertTokenizer(t)
	lens := Lengths{Query: 64, Passage: 96}
	pb := lengthBatch(t, tok, []int{3, 10, 2, 7}, []int{20, 38, 5, 14, 9, 30, 11, 25}, 7)
	next := func(int) (PairBatch, error) { return pb, nil }
	infonce, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	newModel := func(dropout float64) *model.BiEncoder {
		m, err := model.NewBiEncoder(bucketCfg(tok, "mean", dropout), true, 5)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m, 0.3, 5)
		return m
	}
	fixed, err := NewBiTask(newModel(0), tok, TaskOptions{B: 4, N: 8, Lengths: lens, Loss: infonce, Masked: true, Seed: 1, Stream: StreamTrain, Next: next})
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	wantLoss, _, err := fixed.Step(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, dropout := range []float64{0, 0.1} {
		cached, err := NewCachedBiTask(newModel(dropout), tok, TaskOptions{B: 4, N: 8, MiniBatch: 2, Lengths: lens, Loss: infonce, Masked: true, Seed: 1, Stream: StreamTrain, Next: next})
		if err != nil {
			t.Fatal(err)
		}
		cached.Dynamic = true
		loss, _, err := cached.Step(0)
		if err != nil {
			t.Fatalf("dropout %g: %v", dropout, err)
		}
		if cached.Built() != 3 {
			t.Errorf("dropout %g: %d chunk graphs built besides the maximum lengths', want 3 (queries 32; passages 32, 64)", dropout, cached.Built())
		}
		if dropout == 0 {
			fp, cp := fixed.Params(), cached.Params()
			if len(fp) != len(cp) {
				t.Fatalf("%d parameters cached, %d fixed", len(cp), len(fp))
			}
			d, gmax := 0.0, 0.0
			for i := range fp {
				if fp[i].Name != cp[i].Name {
					t.Fatalf("parameter %d: %s cached, %s fixed", i, cp[i].Name, fp[i].Name)
				}
				d = max(d, maxAbsDiff(fp[i].Grad, cp[i].Grad))
				gmax = max(gmax, maxAbsDiff(fp[i].Grad, make([]float32, len(fp[i].Grad))))
			}
			if math.Abs(loss-wantLoss) > 1e-6 || d > 1e-6*gmax || gmax == 0 {
				t.Errorf("loss %.9g, fixed padding %.9g; gradients differ by %.3g (largest %.3g)", loss, wantLoss, d, gmax)
			}
			t.Logf("|loss difference| %.3g, max |gradient difference| %.3g (largest |gradient| %.3g)", math.Abs(loss-wantLoss), d, gmax)
		}
		cached.Close()
	}
}
