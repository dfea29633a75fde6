package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func tinyFiDConfig() FiDConfig {
	return FiDConfig{Vocab: 11, Hidden: 8, Layers: 1, Heads: 2, FFN: 12, Dropout: 0.1, K: 3, EncLen: 4, DecLen: 3}
}

// fidLogProbs builds FiD's log-probabilities of every next decoder token of ex (B = len(ex)) and
// returns the graph's loss (their weighted sum), the binder and the log-probabilities' node.
func fidLogProbs(t *testing.T, f *FiD, ex []FiDExample, train bool) (*gorgonia.ExprGraph, *Binder, *gorgonia.Node) {
	t.Helper()
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := f.NewFiDInputs(g, len(ex), "x")
	if err := in.Let(ex, 0); err != nil {
		t.Fatal(err)
	}
	Ld := f.Cfg.DecLen
	var pos, tgt []int
	for i, e := range ex {
		for j := 0; j+1 < len(e.Decoder); j++ {
			pos, tgt = append(pos, i*Ld+j), append(tgt, e.Decoder[j+1])
		}
	}
	tg := NewTargets(g, len(pos), "x.t")
	if err := tg.Let(pos, tgt); err != nil {
		t.Fatal(err)
	}
	lp, err := f.BuildLogProbs(b, in, tg, train)
	if err != nil {
		t.Fatal(err)
	}
	return g, b, lp
}

var fidExamples = []FiDExample{
	{Passages: [][]int{{1, 2, 3, 4}, {1, 5, 6}, {1, 7}}, Decoder: []int{1, 8, 9}},
	{Passages: [][]int{{1, 9, 10}}, Decoder: []int{1, 3}},
}

// TestFiDGradients checks the gradient of every FiD parameter (the shared word embedding read by
// encoder, decoder and output, the cross-attention, dropout on) against central differences in
// float64, with an unused passage slot and padding.
func TestFiDGradients(t *testing.T) {
	f, err := newFiD(tinyFiDConfig(), 4, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	// decoder: 2 embeddings + 16 of a GPT-2 block + 10 cross-attention + 2 ln_f; encoder: the same less the word embedding.
	checkModelGradients(t, "fid", f.Params(), func() (*Binder, *gorgonia.Node) {
		_, b, lp := fidLogProbs(t, f, fidExamples, true)
		return b, lp
	}, 2+16+10+2+1+16+2, func() { f.SetRNG(rand.New(rand.NewPCG(8, 8))) })
}

// checkModelGradients moves every LayerNorm parameter and bias of params off its initial value
// (N(0, 0.3²)), builds the graph (its binder and log-probabilities) and checks the gradient of a
// weighted sum of the log-probabilities with respect to every bound parameter, want of them,
// against central differences in float64; before runs before every run (dropout reseeding).
func checkModelGradients(t *testing.T, name string, params []*Param, build func() (*Binder, *gorgonia.Node), want int, before func()) {
	t.Helper()
	pr := rand.New(rand.NewPCG(3, 3))
	for _, p := range params {
		if strings.Contains(p.Name, "ln_") || strings.HasSuffix(p.Name, ".bias") {
			for i, d := 0, p.Value.Data().([]float64); i < len(d); i++ {
				d[i] += 0.3 * pr.NormFloat64()
			}
		}
	}
	b, lp := build()
	loss, err := weightedSum(lp, 5)
	if err != nil {
		t.Fatal(err)
	}
	var wrt []*gorgonia.Node
	var vals []*tensor.Dense
	var names []string
	for _, bd := range b.Bound() {
		wrt, vals, names = append(wrt, bd.Node), append(vals, bd.Param.Value), append(names, bd.Param.Name)
	}
	if len(wrt) != want || len(params) != want {
		t.Fatalf("%s: graph binds %d parameters, model has %d, want %d", name, len(wrt), len(params), want)
	}
	fdCheck(t, name, loss, wrt, vals, names, before, 6, 1e-5)
}

// TestFiDPassageOrderAndPadding: the passages meet only in the decoder's cross-attention, whose
// softmax runs over the concatenation, so permuting a question's passages, or moving the
// padding slot, leaves its log-probabilities unchanged (to float64 rounding), while changing a
// passage changes them.
func TestFiDPassageOrderAndPadding(t *testing.T) {
	f, err := newFiD(tinyFiDConfig(), 5, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	run := func(ex []FiDExample) []float64 {
		g, _, lp := fidLogProbs(t, f, ex, false)
		var v gorgonia.Value
		gorgonia.Read(lp, &v)
		runGraph(t, g)
		return values(v)
	}
	base := run(fidExamples)
	perm := []FiDExample{{Passages: [][]int{{1, 7}, {1, 2, 3, 4}, {1, 5, 6}}, Decoder: fidExamples[0].Decoder}, fidExamples[1]}
	assertClose(t, "permuted passages", run(perm), base, 1e-12)
	other := []FiDExample{{Passages: [][]int{{1, 2, 3, 4}, {1, 5, 6}, {1, 8}}, Decoder: fidExamples[0].Decoder}, fidExamples[1]}
	got := run(other)
	if math.Abs(got[0]-base[0]) < 1e-9 {
		t.Errorf("changing a passage left log p = %g", got[0])
	}
	assertClose(t, "second question (its own passages)", got[2:], base[2:], 1e-12)
}

// TestFiDGreedyIsArgmax: the runner's greedy tokens are the argmax of the graph's next-token
// distribution, token by token, and their log-probabilities those the graph gives them.
func TestFiDGreedyIsArgmax(t *testing.T) {
	f, err := newFiD(tinyFiDConfig(), 6, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewFiDRunner(f, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ex := []FiDExample{{Passages: fidExamples[0].Passages, Decoder: []int{1}}, {Passages: fidExamples[1].Passages, Decoder: []int{1}}}
	gens, err := r.Greedy(ex, 2, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, gen := range gens {
		if len(gen.Tokens) != 2 {
			t.Fatalf("example %d: %d tokens, want 2", i, len(gen.Tokens))
		}
		dec := append([]int{1}, gen.Tokens...)
		var lps []float64
		for v := 0; v < f.Cfg.Vocab; v++ { // log p of every token after [CLS]: the first must be the argmax
			g, _, lp := fidLogProbs(t, f, []FiDExample{{Passages: ex[i].Passages, Decoder: []int{1, v}}}, false)
			var val gorgonia.Value
			gorgonia.Read(lp, &val)
			runGraph(t, g)
			lps = append(lps, values(val)[0])
		}
		for v, lp := range lps {
			if lp > lps[gen.Tokens[0]] {
				t.Errorf("example %d: token %d has log p %g > the greedy token %d's %g", i, v, lp, gen.Tokens[0], lps[gen.Tokens[0]])
			}
		}
		g, _, lp := fidLogProbs(t, f, []FiDExample{{Passages: ex[i].Passages, Decoder: dec}}, false)
		var val gorgonia.Value
		gorgonia.Read(lp, &val)
		runGraph(t, g)
		v := values(val)
		if want := v[0] + v[1]; math.Abs(gen.LogProb-want) > 1e-9 {
			t.Errorf("example %d: greedy log p %g, graph %g", i, gen.LogProb, want)
		}
	}
}

func TestFiDInputErrors(t *testing.T) {
	f, err := NewFiD(tinyFiDConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	in := f.NewFiDInputs(gorgonia.NewGraph(), 1, "x")
	for name, ex := range map[string][]FiDExample{
		"two examples":  {fidExamples[1], fidExamples[1]},
		"four passages": {{Passages: [][]int{{1}, {1}, {1}, {1}}, Decoder: []int{1}}},
		"long passage":  {{Passages: [][]int{{1, 2, 3, 4, 5}}, Decoder: []int{1}}},
		"no passage":    {{Decoder: []int{1}}},
		"long decoder":  {{Passages: [][]int{{1}}, Decoder: []int{1, 2, 3, 4}}},
	} {
		if err := in.Let(ex, 0); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewFiD(FiDConfig{Vocab: 11, Hidden: 8, Layers: 1, Heads: 3, FFN: 12, K: 2, EncLen: 4, DecLen: 3}, 1); err == nil {
		t.Error("heads not dividing hidden: no error")
	}
}

// TestFiDInitFromReader: after InitFromReader every FiD parameter but the cross-attention's is
// the reader's bit for bit (position tables: the reader's first Le and Ld rows), the
// cross-attention keeps NewFiD's values, and with its output projection zeroed FiD's decoder is
// the reader: the same log-probabilities of every token at every position, whatever the
// passages. A reader too short or of other heads is refused and leaves FiD unchanged.
func TestFiDInitFromReader(t *testing.T) {
	cfg := tinyFiDConfig()
	cfg.Layers = 2
	rc := EncoderConfig{Encoder: EncoderTransformer, Vocab: cfg.Vocab, Hidden: cfg.Hidden, Layers: cfg.Layers, Heads: cfg.Heads, FFN: cfg.FFN, MaxPosition: 6, Dropout: 0.1}
	r, err := newReader(rc, 9, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	rr := rand.New(rand.NewPCG(1, 2))
	for _, p := range r.Params() { // as after pretraining: no bias 0 or LayerNorm weight 1 left
		p.fill(func() float64 { return 0.3 * rr.NormFloat64() })
	}
	f, err := newFiD(cfg, 4, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := newFiD(cfg, 4, tensor.Float64)
	if err := f.InitFromReader(r); err != nil {
		t.Fatal(err)
	}
	copied, kept := 0, 0
	for i, p := range f.Params() {
		got, init := values(p.Value), values(fresh.Params()[i].Value)
		name := p.Name[strings.Index(p.Name, "r.")+2:] // after "fid.decoder." or "fid.encoder."
		if strings.Contains(name, "xattn.") || strings.Contains(name, "ln_x.") {
			kept++
			if !slices.Equal(got, init) {
				t.Errorf("%s changed", p.Name)
			}
			continue
		}
		src := r.Param("reader." + name)
		if src == nil {
			t.Fatalf("%s: no reader.%s", p.Name, name)
		}
		want := values(src.Value)[:len(got)]
		if !slices.Equal(got, want) {
			t.Errorf("%s is not reader.%s bit for bit", p.Name, name)
		}
		if slices.Equal(got, init) {
			t.Errorf("%s: still its own initialisation", p.Name)
		}
		copied++
	}
	// decoder: 2 embeddings + 2 x 16 of a GPT-2 block + ln_f = 36; encoder: 35 (the word embedding is the decoder's).
	if copied != 36+35 || kept != 2*10 {
		t.Errorf("%d parameters copied, %d kept; want 71 and 20", copied, kept)
	}
	if f.Enc.byName["embeddings.word"] != f.Dec.byName["embeddings.word"] {
		t.Error("the encoder no longer shares the decoder's word embedding")
	}

	// With the cross-attention's output projection zero, the decoder is the reader.
	for i := 0; i < cfg.Layers; i++ {
		for _, n := range []string{"weight", "bias"} {
			f.Dec.byName[fmt.Sprintf("layer.%d.xattn.out.%s", i, n)].constant(0)
		}
	}
	dec := []int{1, 8, 9}
	var pos, tgt []int
	for p := range dec {
		for v := 0; v < cfg.Vocab; v++ {
			pos, tgt = append(pos, p), append(tgt, v)
		}
	}
	g := gorgonia.NewGraph()
	in, tg := f.NewFiDInputs(g, 1, "x"), NewTargets(g, len(pos), "y")
	lp, err := f.BuildLogProbs(NewBinder(g), in, tg, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Let([]FiDExample{{Passages: [][]int{{1, 2, 3, 4}, {1, 5}}, Decoder: dec}}, 0); err != nil {
		t.Fatal(err)
	}
	tg.Let(pos, tgt)
	runGraph(t, g)
	rg := gorgonia.NewGraph()
	rin, rtg := newInputs(rg, 1, len(dec), "r", tensor.Float64), NewTargets(rg, len(pos), "ry")
	rlp, err := r.BuildLogProbs(NewBinder(rg), rin, rtg, false)
	if err != nil {
		t.Fatal(err)
	}
	rin.Let(dec, []float32{1, 1, 1}, nil)
	rtg.Let(pos, tgt)
	runGraph(t, rg)
	assertClose(t, "decoder log p", values(lp.Value()), values(rlp.Value()), 1e-12)

	for _, bad := range []EncoderConfig{{MaxPosition: cfg.EncLen - 1, Heads: cfg.Heads}, {MaxPosition: 6, Heads: 4}} {
		c := rc
		c.MaxPosition, c.Heads = bad.MaxPosition, bad.Heads
		short, err := newReader(c, 9, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := newFiD(cfg, 4, tensor.Float64)
		if err := g.InitFromReader(short); err == nil || !strings.Contains(err.Error(), "fid from reader") {
			t.Errorf("positions %d, heads %d: err = %v", c.MaxPosition, c.Heads, err)
		}
		for i, p := range g.Params() {
			if !slices.Equal(values(p.Value), values(fresh.Params()[i].Value)) {
				t.Errorf("positions %d, heads %d: refused, yet %s changed", c.MaxPosition, c.Heads, p.Name)
			}
		}
	}
}

// fidMemory runs FiD's encoder on ex and returns the memory [K·Le·H] (inference).
func fidMemory(t *testing.T, f *FiD, ex FiDExample) []float64 {
	t.Helper()
	g := gorgonia.NewGraph()
	in := f.NewFiDInputs(g, 1, "x")
	mem, err := f.BuildEncoder(NewBinder(g), in.Enc, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Let([]FiDExample{ex}, 0); err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	return values(mem.Value())
}

// TestFiDCausalEncoder: with CausalEncoder, changing a passage's last token leaves the states of
// the tokens before it bit for bit and changes its own; the bidirectional encoder (the default)
// changes the earlier ones too.
func TestFiDCausalEncoder(t *testing.T) {
	for _, causal := range []bool{true, false} {
		cfg := tinyFiDConfig()
		cfg.CausalEncoder = causal
		f, err := newFiD(cfg, 4, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		a := fidMemory(t, f, FiDExample{Passages: [][]int{{1, 2, 3, 4}}, Decoder: []int{1}})
		b := fidMemory(t, f, FiDExample{Passages: [][]int{{1, 2, 3, 5}}, Decoder: []int{1}})
		H := cfg.Hidden
		before, last := slices.Equal(a[:3*H], b[:3*H]), slices.Equal(a[3*H:4*H], b[3*H:4*H])
		if last || before != causal {
			t.Errorf("causal %v: earlier tokens unchanged %v, last token unchanged %v", causal, before, last)
		}
	}
}

// TestFiDCrossFromSelf: every decoder layer's cross-attention becomes its self-attention's
// weights bit for bit (ln_x from ln_1), and nothing else changes.
func TestFiDCrossFromSelf(t *testing.T) {
	cfg := tinyFiDConfig()
	cfg.Layers = 2
	f, _ := newFiD(cfg, 4, tensor.Float64)
	rr := rand.New(rand.NewPCG(1, 2))
	var before [][]float64
	for _, p := range f.Params() { // no bias 0 or LayerNorm weight 1 left
		p.fill(func() float64 { return 0.3 * rr.NormFloat64() })
		before = append(before, values(p.Value))
	}
	f.CrossFromSelf()
	set := 0
	for i, p := range f.Params() {
		got := values(p.Value)
		from := strings.NewReplacer("xattn.", "attn.", "ln_x.", "ln_1.").Replace(p.Name)
		if from == p.Name {
			if !slices.Equal(got, before[i]) {
				t.Errorf("%s changed", p.Name)
			}
			continue
		}
		if !slices.Equal(got, values(f.Dec.byName[strings.TrimPrefix(from, "fid.decoder.")].Value)) || slices.Equal(got, before[i]) {
			t.Errorf("%s is not %s", p.Name, from)
		}
		set++
	}
	if set != 2*10 {
		t.Errorf("%d parameters set, want 20", set)
	}
}
