package colbert

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/trainer"
)

// longConfig is testConfig with passages of up to 80 tokens, so that batches fall into the
// buckets 32, 64 and 80 (PadMultiple 32).
func longConfig(v int) Config {
	c := testConfig(v)
	c.Encoder.Layers, c.Encoder.MaxPosition, c.DocumentLength = 2, 96, 80
	return c
}

// randomText is n words of the test vocabulary (punctuation included) drawn from r.
func randomText(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = testVocab[7+r.IntN(len(testVocab)-7)]
	}
	return strings.Join(w, " ")
}

// lossCase is a ColBERT loss with the batch fields it reads: B = 4 queries, N = 8 passages (the
// positives, then one hard negative each).
type lossCase struct {
	name string
	loss Loss
	fill func(b *Batch, r *rand.Rand)
}

var lossCases = []lossCase{
	{"contrastive", Loss{Name: "colbert_contrastive", Temperature: 0.7}, nil},
	{"contrastive_masked", Loss{Name: "colbert_contrastive", Temperature: 1, Masked: true}, func(b *Batch, _ *rand.Rand) {
		b.Mask = make([]float32, 4*8)
		for i := range b.Mask {
			b.Mask[i] = 1
		}
		b.Mask[0*8+5], b.Mask[2*8+1] = 0, 0 // two false negatives
	}},
	{"kl_distill", Loss{Name: "colbert_kl_distill", Temperature: 1, TeacherTemperature: 0.5}, func(b *Batch, r *rand.Rand) {
		b.Teacher = make([]float32, 4*2)
		for i := range b.Teacher {
			b.Teacher[i] = float32(4 * r.Float64())
		}
	}},
}

// batches are the steps' batches of c: passage lengths drawn so that the steps' longest
// passages (and the chunks') land in different buckets (step 0: one of 78 words, 80; step 1: at
// most 40, 64; step 2: at most 20, 32).
func batches(c lossCase, seed uint64) func(step int) (Batch, error) {
	return func(step int) (Batch, error) {
		r := rand.New(rand.NewPCG(seed, uint64(step)))
		b := Batch{}
		for range 4 {
			b.Queries = append(b.Queries, randomText(r, 2+r.IntN(9)))
		}
		most := []int{78, 40, 20}[step%3]
		for i := range 8 {
			n := 1 + r.IntN(most)
			if i == 5 {
				n = most
			}
			b.Passages = append(b.Passages, randomText(r, n))
		}
		if c.fill != nil {
			c.fill(&b, r)
		}
		return b, nil
	}
}

// stepGrads runs one step of task and returns its loss and each parameter's gradient by name.
func stepGrads(t *testing.T, task TrainTask, step int) (float64, map[string][]float32) {
	t.Helper()
	loss, n, err := task.Step(step)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("step of %d examples", n)
	}
	g := map[string][]float32{}
	for _, p := range task.Params() {
		g[p.Name] = slices.Clone(p.Grad)
	}
	task.AfterUpdate()
	return loss, g
}

// compare returns the largest |a-b| / (1 + |b|) over the loss and every gradient, failing when
// the parameter sets differ or a value is not finite.
func compare(t *testing.T, what string, la, lb float64, ga, gb map[string][]float32) float64 {
	t.Helper()
	if len(ga) != len(gb) || len(gb) == 0 {
		t.Fatalf("%s: %d parameters against %d", what, len(ga), len(gb))
	}
	worst := math.Abs(la-lb) / (1 + math.Abs(lb))
	nonzero := 0
	for name, b := range gb {
		a := ga[name]
		if len(a) != len(b) {
			t.Fatalf("%s: %s: %d values against %d", what, name, len(a), len(b))
		}
		for i := range b {
			d := math.Abs(float64(a[i])-float64(b[i])) / (1 + math.Abs(float64(b[i])))
			if !(d < math.Inf(1)) {
				t.Fatalf("%s: %s[%d] = %v against %v", what, name, i, a[i], b[i])
			}
			worst = max(worst, d)
			if b[i] != 0 {
				nonzero++
			}
		}
	}
	if nonzero == 0 {
		t.Fatalf("%s: every gradient is zero", what)
	}
	return worst
}

// f32Tol bounds |cached - plain| / (1 + |plain|) over the loss and every gradient value in
// float32 (measured 1.1e-6 cached, 1.6e-7 bucketed: see the tests' logs).
const f32Tol = 1e-5

// TestCachedTaskMatchesPlain: the gradient-cached step's loss and every parameter's gradient
// equal the plain step's (Task: one graph over the whole batch, passages padded to
// DocumentLength) on a 2-layer BERT in float32 without dropout, for colbert_contrastive (in-batch
// and one hard negative, with and without a candidate mask) and colbert_kl_distill, chunks of 2
// and 4 rows, passage chunks at DocumentLength and in their own buckets, over three steps of
// different buckets.
func TestCachedTaskMatchesPlain(t *testing.T) {
	tok := testTokenizer(t)
	worst := 0.0
	for _, c := range lossCases {
		for _, M := range []int{2, 4} {
			for _, dyn := range []bool{false, true} {
				what := fmt.Sprintf("%s/M=%d/dynamic=%v", c.name, M, dyn)
				newModel := func() *Model {
					m, err := New(longConfig(tok.VocabSize()), 11)
					if err != nil {
						t.Fatal(err)
					}
					return m
				}
				o := TaskOptions{B: 4, N: 8, Loss: c.loss, Seed: 3, Next: batches(c, 7), MiniBatch: M, Dynamic: dyn}
				cached, err := NewTrainTask(newModel(), tok, o)
				if err != nil {
					t.Fatal(err)
				}
				plain, err := NewTask(newModel(), tok, 4, 8, c.loss, 3, o.Next)
				if err != nil {
					t.Fatal(err)
				}
				for step := range 3 {
					lc, gc := stepGrads(t, cached, step)
					lp, gp := stepGrads(t, plain, step)
					w := compare(t, fmt.Sprintf("%s/step %d", what, step), lc, lp, gc, gp)
					if w > f32Tol {
						t.Errorf("%s: step %d: largest relative difference %.3g > %g (loss %v against %v)", what, step, w, f32Tol, lc, lp)
					}
					worst = max(worst, w)
				}
				if ct := cached.(*CachedTask); dyn != (ct.Built() > 0) {
					t.Errorf("%s: %d chunk graphs built beyond the two fixed lengths", what, ct.Built())
				}
				cached.Close()
				plain.Close()
			}
		}
	}
	t.Logf("float32: largest |cached - plain| / (1 + |plain|) over losses and gradients: %.3g (tolerance %g)", worst, f32Tol)
}

// TestCachedTaskMatchesPlainFloat64 is the same comparison in float64 (the plain side through
// NewGraph), where the two must agree to 1e-10: what float32 shows is rounding.
func TestCachedTaskMatchesPlainFloat64(t *testing.T) {
	tok := testTokenizer(t)
	mk, _ := MarkersOf(tok)
	worst := 0.0
	for _, c := range lossCases {
		for _, dyn := range []bool{false, true} {
			m, err := NewOf(longConfig(tok.VocabSize()), 13, tensor.Float64)
			if err != nil {
				t.Fatal(err)
			}
			next := batches(c, 9)
			cached, err := NewCachedTask(m, tok, TaskOptions{B: 4, N: 8, Loss: c.loss, Seed: 3, Next: next, MiniBatch: 2, Dynamic: dyn})
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewGraph(m, 4, 8, c.loss, true)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := next(0)
			if err := g.Fill(m, tok, mk, b, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := g.VM.RunAll(); err != nil {
				t.Fatal(err)
			}
			lc, _, err := cached.Step(0)
			if err != nil {
				t.Fatal(err)
			}
			lp := g.Loss.Value().Data().(float64)
			w := math.Abs(lc-lp) / (1 + math.Abs(lp))
			for _, bd := range g.Binder.Bound() {
				gv, _ := bd.Node.Grad()
				want, got := gv.Data().([]float64), cached.Sum(bd.Param).Data().([]float64)
				if len(got) != len(want) {
					t.Fatalf("%s: %s: %d values against %d", c.name, bd.Param.Name, len(got), len(want))
				}
				for i := range want {
					w = max(w, math.Abs(got[i]-want[i])/(1+math.Abs(want[i])))
				}
			}
			if w > 1e-10 {
				t.Errorf("%s/dynamic=%v: largest relative difference %.3g > 1e-10", c.name, dyn, w)
			}
			worst = max(worst, w)
			g.VM.Close()
			cached.Close()
		}
	}
	t.Logf("float64: largest |cached - plain| / (1 + |plain|): %.3g", worst)
}

// TestBucketedTaskMatchesPlain: the length-bucketed step's loss and gradients equal the padded
// step's in float32 without dropout, for the three losses over three steps whose passages fall
// into the buckets 80, 64 and 32. The graphs built: 4, as each new bucket evicts the last one
// (together they would hold more padded tokens than the one graph of length 80).
func TestBucketedTaskMatchesPlain(t *testing.T) {
	tok := testTokenizer(t)
	worst := 0.0
	for _, c := range lossCases {
		newModel := func() *Model {
			m, err := New(longConfig(tok.VocabSize()), 17)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		next := batches(c, 21)
		bt, err := NewTrainTask(newModel(), tok, TaskOptions{B: 4, N: 8, Loss: c.loss, Seed: 3, Next: next, Dynamic: true})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := NewTask(newModel(), tok, 4, 8, c.loss, 3, next)
		if err != nil {
			t.Fatal(err)
		}
		var lens []int
		for step := range 4 {
			lb, gb := stepGrads(t, bt, step)
			cached := bt.(*BucketedTask).Cached() // the step's graph is the most recently used
			lens = append(lens, cached[len(cached)-1])
			lp, gp := stepGrads(t, plain, step)
			w := compare(t, fmt.Sprintf("%s/step %d", c.name, step), lb, lp, gb, gp)
			if w > f32Tol {
				t.Errorf("%s: step %d: largest relative difference %.3g > %g (loss %v against %v)", c.name, step, w, f32Tol, lb, lp)
			}
			worst = max(worst, w)
		}
		if want := []int{80, 64, 32, 80}; !slices.Equal(lens, want) || bt.(*BucketedTask).Built() != 4 {
			t.Errorf("%s: passage lengths %v, want %v; %d graphs built, want 4", c.name, lens, want, bt.(*BucketedTask).Built())
		}
		bt.Close()
		plain.Close()
	}
	t.Logf("float32: largest |bucketed - plain| / (1 + |plain|): %.3g (tolerance %g)", worst, f32Tol)
}

// BucketLen keeps a padding position for every passage shorter than DocumentLength.
func TestBucketLen(t *testing.T) {
	for _, c := range [][3]int{{1, 180, 32}, {31, 180, 32}, {32, 180, 64}, {64, 180, 96}, {170, 180, 180}, {179, 180, 180}, {180, 180, 180}, {12, 12, 12}, {5, 12, 12}} {
		if got := BucketLen(c[0], c[1]); got != c[2] {
			t.Errorf("BucketLen(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}

// With dropout, the cached step replays each chunk's masks in its re-forward (Step fails
// otherwise) and is a function of (seed, step): two tasks give the same loss and gradients bit
// for bit; another seed gives another loss.
func TestCachedTaskDropoutReplays(t *testing.T) {
	tok := testTokenizer(t)
	run := func(seed uint64) (float64, []trainer.Param) {
		cfg := longConfig(tok.VocabSize())
		cfg.Encoder.Dropout = 0.2
		m, err := New(cfg, 5)
		if err != nil {
			t.Fatal(err)
		}
		task, err := NewTrainTask(m, tok, TaskOptions{B: 4, N: 8, Loss: lossCases[0].loss, Seed: seed, Next: batches(lossCases[0], 1), MiniBatch: 2, Dynamic: true})
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		var loss float64
		for step := range 2 {
			if loss, _, err = task.Step(step); err != nil {
				t.Fatal(err)
			}
		}
		ps := slices.Clone(task.Params())
		for i := range ps {
			ps[i].Grad = slices.Clone(ps[i].Grad)
		}
		return loss, ps
	}
	l1, p1 := run(1)
	l2, p2 := run(1)
	if l1 != l2 {
		t.Fatalf("loss %v then %v with the same seed", l1, l2)
	}
	for i := range p1 {
		if !slices.Equal(p1[i].Grad, p2[i].Grad) {
			t.Fatalf("%s: gradients differ with the same seed", p1[i].Name)
		}
	}
	if l3, _ := run(2); l3 == l1 {
		t.Fatalf("loss %v with seeds 1 and 2: dropout not drawn?", l1)
	}
}

// NewCachedTask refuses chunks that do not divide the batch.
func TestCachedTaskRefusesChunks(t *testing.T) {
	tok := testTokenizer(t)
	m, _ := New(testConfig(tok.VocabSize()), 1)
	for _, M := range []int{3, 8} {
		_, err := NewCachedTask(m, tok, TaskOptions{B: 4, N: 8, Loss: lossCases[0].loss, MiniBatch: M})
		if err == nil || !strings.Contains(err.Error(), "do not divide 4 queries and 8 passages") {
			t.Errorf("M = %d: err = %v", M, err)
		}
	}
}
