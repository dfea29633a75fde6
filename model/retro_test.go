package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// tinyRetroConfig: n = 6 tokens in l = 3 chunks of m = 2, k = 2 neighbours of r = 3 tokens, CCA
// in the second of two layers.
func tinyRetroConfig() RetroConfig {
	return RetroConfig{Vocab: 11, Hidden: 8, Layers: 2, Heads: 2, FFN: 12, Dropout: 0.1, SeqLen: 6, Chunk: 2, Neighbours: 2, NeighbourLen: 3, EncoderLayers: 1, CCAFrom: 1}
}

var retroExamples = []RetroExample{
	{Tokens: []int{1, 2, 3, 4, 5, 6}, Neighbours: [][][]int{{{2, 3, 4}, {7}}, {{4, 5, 8}}, {{9, 10}, {6, 1, 2}}}},
	{Tokens: []int{1, 8, 9, 3}, Neighbours: [][][]int{{{8, 9}}}}, // short: chunk 1 has no neighbours, chunk 2 is padding
}

// retroGraph builds RETRO's states and the log-probabilities of every next token of ex.
func retroGraph(t *testing.T, m *Retro, ex []RetroExample, train bool) (*gorgonia.ExprGraph, *Binder, *gorgonia.Node, *gorgonia.Node) {
	t.Helper()
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in, err := m.NewRetroInputs(g, len(ex), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Let(ex, 0); err != nil {
		t.Fatal(err)
	}
	n := m.Cfg.SeqLen
	var pos, tgt []int
	for i, e := range ex {
		for j := 0; j+1 < len(e.Tokens); j++ {
			pos, tgt = append(pos, i*n+j), append(tgt, e.Tokens[j+1])
		}
	}
	tg := NewTargets(g, len(pos), "x.t")
	if err := tg.Let(pos, tgt); err != nil {
		t.Fatal(err)
	}
	x, err := m.BuildStates(b, in, train)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := LMLogProb(x, m.Dec.node(b, "embeddings.word"), tg.Pos, tg.Tgt)
	if err != nil {
		t.Fatal(err)
	}
	return g, b, x, lp
}

// TestChunkedCrossAttentionHandComputed: n = 4, m = 2 (chunks C_0 = positions 0-1, C_1 = 2-3),
// H = 1, Scale 1, queries q = (5, 1, 2, -1); E_0 has keys (0, 1) and values (1, 3), E_1 keys
// (1, 1), values (5, 7), its second row masked. Position 0 (< m-1) reads nothing: 0. Positions
// 1 and 2 (the last token of C_0 and the first of C_1) read E_0: weights softmax(0, q) =
// (1, e^q)/(1+e^q), out (1 + 3e^q)/(1 + e^q), 2.4621171572600 at q = 1 and 2.7615941559558 at
// q = 2. Position 3 (the last of C_1) reads E_1, one kept row: 5.
func TestChunkedCrossAttentionHandComputed(t *testing.T) {
	g := gorgonia.NewGraph()
	q := leafIn(g, "q", tensor.New(tensor.WithShape(4, 1), tensor.WithBacking([]float64{5, 1, 2, -1})))
	k := leafIn(g, "k", tensor.New(tensor.WithShape(4, 1), tensor.WithBacking([]float64{0, 1, 1, 1})))
	v := leafIn(g, "v", tensor.New(tensor.WithShape(4, 1), tensor.WithBacking([]float64{1, 3, 5, 7})))
	mask := leafIn(g, "mask", tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 1, 1, 0})))
	out, err := ChunkedCrossAttention(q, k, v, mask, 4, CrossAttentionOptions{Lq: 2, Lk: 2, Heads: 1, Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	e, e2 := math.E, math.E*math.E
	assertClose(t, "CCA", values(out.Value()), []float64{0, (1 + 3*e) / (1 + e), (1 + 3*e2) / (1 + e2), 5}, 1e-12)
	if got := (1 + 3*e) / (1 + e); math.Abs(got-2.4621171572600) > 1e-12 {
		t.Errorf("closed form %v", got)
	}
}

// TestShiftRowsGradients: ShiftRows' gradient against central differences, up and down.
func TestShiftRowsGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, s := range []int{2, -1, 0, 5} {
		gradCheck(t, gradCase{name: "ShiftRows", leaves: []*tensor.Dense{randDense(r, 8, 3)},
			build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) { return ShiftRows(x[0], 4, s) })}, 100, 1e-7)
	}
}

// TestRetroGradients checks the gradient of every RETRO parameter (the word embedding read by
// encoder, decoder and output, the CCA of layer 1, dropout on) against central differences in
// float64, with padding, a chunk without neighbours and an unused neighbour slot.
func TestRetroGradients(t *testing.T) {
	m, err := newRetro(tinyRetroConfig(), 4, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	// decoder: 2 embeddings + 2·16 of two GPT-2 blocks + 10 of one CCA + 2 ln_f; encoder: 1 + 16 + 2.
	checkModelGradients(t, "retro", m.Params(), func() (*Binder, *gorgonia.Node) {
		_, b, _, lp := retroGraph(t, m, retroExamples, true)
		return b, lp
	}, 2+32+10+2+1+16+2, func() { m.SetRNG(rand.New(rand.NewPCG(8, 8))) })
}

// TestRetroCausality: the neighbours of chunk c are read from position c·m+m-1 on, so changing
// them leaves every earlier position's states bit for bit and changes that position's; changing
// a later token leaves the earlier positions too. n = 6, m = 2: chunk 1's neighbours reach
// positions 3 and 4 (the last token of chunk 1, the first of chunk 2).
func TestRetroCausality(t *testing.T) {
	m, err := newRetro(tinyRetroConfig(), 5, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	H := m.Cfg.Hidden
	states := func(e RetroExample) []float64 {
		g, _, x, _ := retroGraph(t, m, []RetroExample{e}, false)
		runGraph(t, g)
		return values(x.Value())
	}
	base := states(retroExamples[0])
	changed := retroExamples[0]
	changed.Neighbours = [][][]int{changed.Neighbours[0], {{10, 10, 10}, {3}}, changed.Neighbours[2]}
	got := states(changed)
	for p := 0; p < 5; p++ { // position 5 reads chunk 2's neighbours, and no layer after the CCA mixes positions
		same := true
		for j := 0; j < H; j++ {
			same = same && got[p*H+j] == base[p*H+j]
		}
		if want := p < 3; same != want {
			t.Errorf("chunk 1's neighbours changed: position %d unchanged = %v, want %v", p, same, want)
		}
	}
	later := retroExamples[0]
	later.Tokens = []int{1, 2, 3, 4, 9, 9}
	got = states(later)
	assertClose(t, "positions 0-3 with tokens 4-5 changed", got[:4*H], base[:4*H], 0)
}

// TestRetroGreedyIsArgmax: the runner's first greedy token is the argmax of the graph's
// next-token distribution with the neighbours retrieve gives the complete chunks.
func TestRetroGreedyIsArgmax(t *testing.T) {
	m, err := newRetro(tinyRetroConfig(), 6, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRetroRunner(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	asked := 0
	retrieve := func(chunk []int) ([][]int, error) {
		asked++
		return [][]int{{chunk[1], 4, 5}}, nil
	}
	prompt := []int{1, 2, 3}
	gens, err := r.Greedy([][]int{prompt}, 2, -1, 0, retrieve)
	if err != nil {
		t.Fatal(err)
	}
	if len(gens[0].Tokens) != 2 || asked != 2 { // chunk 0 before token 1, chunk 1 (3, token 1) before token 2
		t.Fatalf("%d tokens, %d retrievals, want 2 and 2", len(gens[0].Tokens), asked)
	}
	var lps []float64
	for v := 0; v < m.Cfg.Vocab; v++ {
		g, _, _, lp := retroGraph(t, m, []RetroExample{{Tokens: append(append([]int(nil), prompt...), v), Neighbours: [][][]int{{{2, 4, 5}}}}}, false)
		runGraph(t, g)
		lps = append(lps, values(lp.Value())[2])
	}
	for v, lp := range lps {
		if lp > lps[gens[0].Tokens[0]] {
			t.Errorf("token %d has log p %g > the greedy token %d's %g", v, lp, gens[0].Tokens[0], lps[gens[0].Tokens[0]])
		}
	}
}

// TestRetroBounds: configurations and batches out of bounds fail before anything is allocated;
// inputs that do not fit the graph fail with the example named.
func TestRetroBounds(t *testing.T) {
	for name, f := range map[string]func(*RetroConfig){
		"chunk not dividing n": func(c *RetroConfig) { c.Chunk = 4 },
		"no neighbours":        func(c *RetroConfig) { c.Neighbours = 0 },
		"huge neighbour":       func(c *RetroConfig) { c.NeighbourLen = 1 << 30 },
		"cca past the layers":  func(c *RetroConfig) { c.CCAFrom = 2 },
		"huge sequence":        func(c *RetroConfig) { c.SeqLen, c.Chunk = 1<<40, 1 },
	} {
		c := tinyRetroConfig()
		f(&c)
		if _, err := NewRetro(c, 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	m, err := NewRetro(tinyRetroConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewRetroInputs(gorgonia.NewGraph(), 1<<40, "x"); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Errorf("huge batch: %v", err)
	}
	in, err := m.NewRetroInputs(gorgonia.NewGraph(), 1, "x")
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string][]RetroExample{
		"two examples":     retroExamples,
		"long sequence":    {{Tokens: []int{1, 2, 3, 4, 5, 6, 7}}},
		"three neighbours": {{Tokens: []int{1}, Neighbours: [][][]int{{{1}, {1}, {1}}}}},
		"long neighbour":   {{Tokens: []int{1}, Neighbours: [][][]int{{{1, 2, 3, 4}}}}},
		"four chunks":      {{Tokens: []int{1}, Neighbours: make([][][]int, 4)}},
		"empty neighbour":  {{Tokens: []int{1}, Neighbours: [][][]int{{{}}}}},
		"no tokens":        {{}},
	} {
		if err := in.Let(ex, 0); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
