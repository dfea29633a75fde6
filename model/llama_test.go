package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func TestLlamaOpGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 8))
	cases := []gradCase{
		{name: "RMSNorm", leaves: []*tensor.Dense{randDense(r, 3, 5), randDense(r, 5)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return RMSNorm(x[0], x[1], 1e-5)
		})},
		{name: "RoPE", leaves: []*tensor.Dense{randDense(r, 6, 8)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return RoPE(x[0], RoPEOptions{L: 3, Heads: 2, Theta: 10})
		})},
		{name: "RoPE offset", leaves: []*tensor.Dense{randDense(r, 4, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return RoPE(x[0], RoPEOptions{L: 2, Heads: 1, Theta: 100, Offset: 5})
		})},
		{name: "SwiGLU", leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 3, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return SwiGLU(x[0], x[1])
		})},
		{name: "RepeatKV", leaves: []*tensor.Dense{randDense(r, 3, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return RepeatKV(x[0], 2, 6)
		})},
	}
	for _, c := range cases {
		gradCheck(t, c, 64, 1e-6)
	}
}

// TestLlamaOpValues checks the forwards against direct formulas.
func TestLlamaOpValues(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	g := gorgonia.NewGraph()
	x := randDense(r, 4, 6)
	w := randDense(r, 6)
	xn, wn := leafIn(g, "x", x), leafIn(g, "w", w)
	rms, err := RMSNorm(xn, wn, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	// 2 heads of 3? dh must be even: 3 heads of 2 on 6 columns, L = 2.
	rope, err := RoPE(xn, RoPEOptions{L: 2, Heads: 3, Theta: 10000, Offset: 7})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := SwiGLU(xn, xn)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RepeatKV(xn, 3, 6)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	xd, wd := x.Data().([]float64), w.Data().([]float64)
	var wantRMS, wantRoPE, wantSw, wantRep []float64
	for i := 0; i < 4; i++ {
		row := xd[i*6 : (i+1)*6]
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/6+1e-5)
		for j, v := range row {
			wantRMS = append(wantRMS, v*s*wd[j])
			wantSw = append(wantSw, v/(1+math.Exp(-v))*v)
		}
		p := float64(7 + i%2)
		for h := 0; h < 3; h++ {
			a, b := row[2*h], row[2*h+1]
			ang := p // dh = 2: the one frequency is theta^0 = 1
			wantRoPE = append(wantRoPE, a*math.Cos(ang)-b*math.Sin(ang), b*math.Cos(ang)+a*math.Sin(ang))
		}
		for h := 0; h < 6; h++ {
			wantRep = append(wantRep, row[(h/2)*2], row[(h/2)*2+1])
		}
	}
	assertClose(t, "RMSNorm", values(rms.Value()), wantRMS, 1e-12)
	assertClose(t, "RoPE", values(rope.Value()), wantRoPE, 1e-6) // float32 angles and table
	assertClose(t, "SwiGLU", values(sw.Value()), wantSw, 1e-12)
	assertClose(t, "RepeatKV", values(rep.Value()), wantRep, 0)
}

// tinyLlamaConfig is a 2-layer LLaMA with grouped-query attention (4 query heads on 2 key/value
// heads of size 4).
func tinyLlamaConfig() LlamaConfig {
	return LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: 19, RopeTheta: 1000, RMSEps: 1e-5, MaxPosition: 32, TieEmbeddings: true}
}

// perturbNorms sets every RMSNorm weight to 1 + N(0, 0.1²), so tests see them applied.
func perturbNorms(m *Llama, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range m.Params() {
		if p.Value.Dims() == 1 {
			p.fill(func() float64 { return 1 + 0.1*r.NormFloat64() })
		}
	}
}

// TestLlamaGradients differentiates the log-likelihood of a padded batch with respect to every
// parameter of a float64 tiny LLaMA (tied and untied) and compares with central differences.
func TestLlamaGradients(t *testing.T) {
	for _, tie := range []bool{true, false} {
		cfg := tinyLlamaConfig()
		cfg.TieEmbeddings = tie
		m, err := newLlama(cfg, 5, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		perturbNorms(m, 6)
		for _, p := range m.Params() { // weights of 0.02 make a flat loss; larger ones test more
			if p.Value.Dims() == 2 {
				d := p.Value.Data().([]float64)
				for i := range d {
					d[i] *= 15
				}
			}
		}
		b := NewBinder(gorgonia.NewGraph())
		loss := tinyLogLik(t, m, b, tensor.Float64)
		var vals []*tensor.Dense
		var names []string
		for _, bd := range b.Bound() {
			vals = append(vals, bd.Param.Value)
			names = append(names, bd.Param.Name)
		}
		if len(vals) != len(m.Params()) {
			t.Fatalf("tie=%t: %d parameters in the graph, want %d", tie, len(vals), len(m.Params()))
		}
		fdCheck(t, "llama", loss, b.Nodes(), vals, names, nil, 12, 1e-5)
	}
}

// tinyLogLik builds, in b's graph, the summed log-likelihood of 5 targets of a batch of two
// sequences (4 and 2 tokens, L = 4) under m with inputs of dtype dt.
func tinyLogLik(t *testing.T, m *Llama, b *Binder, dt tensor.Dtype) *gorgonia.Node {
	t.Helper()
	g := b.g
	in := newInputs(g, 2, 4, "in", dt)
	if err := in.Let([]int{1, 5, 7, 2, 3, 18, 0, 0}, []float32{1, 1, 1, 1, 1, 1, 0, 0}, nil); err != nil {
		t.Fatal(err)
	}
	tg := NewTargets(g, 5, "tgt")
	if err := tg.Let([]int{0, 1, 2, 4, 5}, []int{5, 7, 2, 18, 9}); err != nil {
		t.Fatal(err)
	}
	lp, err := m.BuildLogProbs(b, in, tg)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := gorgonia.Sum(lp)
	if err != nil {
		t.Fatal(err)
	}
	return loss
}

// graphLogits runs BuildLogits on B sequences of L tokens (ids row-major, mask from lens).
func graphLogits(t *testing.T, m *Llama, ids []int, lens []int, L int) []float64 {
	t.Helper()
	g := gorgonia.NewGraph()
	in := newInputs(g, len(lens), L, "in", m.dt)
	mask := make([]float32, len(ids))
	for b, n := range lens {
		for j := 0; j < n; j++ {
			mask[b*L+j] = 1
		}
	}
	if err := in.Let(ids, mask, nil); err != nil {
		t.Fatal(err)
	}
	out, err := m.BuildLogits(NewBinder(g), in)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	return values(out.Value())
}

// TestLlamaDecoderMatchesGraph: the cached decoder's logits, prompt by prefill and the rest one
// token at a time, two sequences of different lengths in one batch, equal the training graph's
// logits (padded batch) within 1e-5.
func TestLlamaDecoderMatchesGraph(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 9)
	if err != nil {
		t.Fatal(err)
	}
	perturbNorms(m, 10)
	for _, p := range m.Params() {
		if p.Value.Dims() == 2 {
			d := p.Value.Data().([]float32)
			for i := range d {
				d[i] *= 20
			}
		}
	}
	const L = 9
	seqs := [][]int{{3, 1, 4, 1, 5, 9, 2, 6, 5}, {2, 7, 18, 2, 8, 0}}
	ids := make([]int, 2*L)
	for b, s := range seqs {
		copy(ids[b*L:], s)
	}
	want := graphLogits(t, m, ids, []int{9, 6}, L)
	d, err := NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	c0, _ := d.NewCache(L)
	c1, _ := d.NewCache(L)
	v := m.Cfg.Vocab
	var worst float64
	check := func(b, pos int, got []float32) {
		for j, x := range got {
			w := want[(b*L+pos)*v+j]
			worst = max(worst, math.Abs(float64(x)-w))
		}
	}
	// Prefill 4 and 2 tokens with all logits, then one token each at a time.
	out, err := d.Forward([]*LlamaCache{c0, c1}, [][]int{seqs[0][:4], seqs[1][:2]}, true)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 4; j++ {
		check(0, j, out[0][j*v:(j+1)*v])
	}
	for j := 0; j < 2; j++ {
		check(1, j, out[1][j*v:(j+1)*v])
	}
	for step := 0; ; step++ {
		var cs []*LlamaCache
		var toks [][]int
		var which []int
		for b, c := range []*LlamaCache{c0, c1} {
			if c.Len() < len(seqs[b]) {
				cs, toks, which = append(cs, c), append(toks, []int{seqs[b][c.Len()]}), append(which, b)
			}
		}
		if len(cs) == 0 {
			break
		}
		pos := []int{cs[0].Len()}
		if len(cs) > 1 {
			pos = append(pos, cs[1].Len())
		}
		out, err := d.Forward(cs, toks, false)
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range which {
			check(b, pos[j], out[j])
		}
	}
	if worst > 1e-5 {
		t.Errorf("decoder logits differ from the graph's by %g, want <= 1e-5", worst)
	}
	t.Logf("max |decoder - graph| = %.3g", worst)
	if _, err := d.Forward([]*LlamaCache{c0}, [][]int{{1}}, false); err == nil || !strings.Contains(err.Error(), "cache") {
		t.Errorf("forward past the cache: %v", err)
	}
}

// TestLlamaGenerate: greedy decoding picks the graph's argmax at every step; sampling is
// deterministic per seed and independent of batching; stop ids end a generation and are left
// out; too long a prompt is one error.
func TestLlamaGenerate(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 11)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() {
		if p.Value.Dims() == 2 {
			d := p.Value.Data().([]float32)
			for i := range d {
				d[i] *= 40
			}
		}
	}
	d, _ := NewLlamaDecoder(m)
	prompts := [][]int{{1, 2, 3}, {4}, {5, 6, 7, 8, 9, 10}}
	gen, err := d.Generate(prompts, SampleOptions{MaxNew: 6})
	if err != nil {
		t.Fatal(err)
	}
	v := m.Cfg.Vocab
	for i, g := range gen {
		if len(g.Tokens) != 6 || g.Stopped {
			t.Fatalf("prompt %d: %+v, want 6 tokens without a stop", i, g)
		}
		seq := append(slices.Clone(prompts[i]), g.Tokens...)
		logits := graphLogits(t, m, seq, []int{len(seq)}, len(seq))
		for j, tok := range g.Tokens {
			row := logits[(len(prompts[i])+j-1)*v : (len(prompts[i])+j)*v]
			best := 0
			for k, x := range row {
				if x > row[best] {
					best = k
				}
			}
			if best != tok {
				t.Errorf("prompt %d step %d: greedy %d, graph argmax %d", i, j, tok, best)
			}
		}
	}
	// A stop id: the first greedy token of prompt 0 ends it at once.
	stopped, err := d.Generate(prompts[:1], SampleOptions{MaxNew: 6, Stop: []int{gen[0].Tokens[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if !stopped[0].Stopped || len(stopped[0].Tokens) != 0 {
		t.Errorf("stop at the first token: %+v", stopped[0])
	}
	o := SampleOptions{MaxNew: 8, Temperature: 0.9, TopP: 0.9, Seed: 7}
	a, err := d.Generate(prompts, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Batch = 1
	b, err := d.Generate(prompts, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Seed = 8
	c, err := d.Generate(prompts, o)
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range a {
		if !slices.Equal(a[i].Tokens, b[i].Tokens) || a[i].LogProb != b[i].LogProb {
			t.Errorf("prompt %d: batch 8 sampled %v, batch 1 %v", i, a[i].Tokens, b[i].Tokens)
		}
		same = same && slices.Equal(a[i].Tokens, c[i].Tokens)
	}
	if same {
		t.Errorf("seeds 7 and 8 sampled the same tokens %v", a)
	}
	if _, err := d.Generate([][]int{make([]int, 30)}, SampleOptions{MaxNew: 3}); err == nil || !strings.Contains(err.Error(), "beyond the context of 32") {
		t.Errorf("30 + 3 tokens in a context of 32: %v", err)
	}
}

// TestSamplerTopP: with top-p the draws stay in the nucleus, and their frequencies follow the
// renormalised probabilities.
func TestSamplerTopP(t *testing.T) {
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.15)), float32(math.Log(0.05))}
	s := &sampler{o: SampleOptions{Temperature: 1, TopP: 0.75}}
	r := rand.New(rand.NewPCG(1, 1))
	var n [4]int
	for i := 0; i < 20000; i++ {
		id, _ := s.pick(logits, r)
		n[id]++
	}
	if n[2] != 0 || n[3] != 0 {
		t.Errorf("top-p 0.75 drew outside {0,1}: %v", n)
	}
	if f := float64(n[0]) / 20000; math.Abs(f-0.625) > 0.02 {
		t.Errorf("p(0) = %.3f, want 0.5/0.8 = 0.625", f)
	}
	s.o = SampleOptions{}
	if id, lp := s.pick(logits, r); id != 0 || math.Abs(lp-math.Log(0.5)) > 1e-6 {
		t.Errorf("greedy: %d, %g", id, lp)
	}
}

// TestGemvRows: the decoder's small-batch products equal float64 dot products (float32 rounding
// only), on shapes with and without whole 4-row blocks and 8-value chunks.
func TestGemvRows(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	for _, s := range [][3]int{{1, 9, 16}, {3, 6, 20}, {2, 13, 5}, {8, 64, 576}, {1, 1, 7}, {5, 12, 37}} {
		m, n, k := s[0], s[1], s[2]
		x := make([]float32, m*k)
		w := make([]float32, n*k)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		out := make([]float32, m*n)
		gemvRows(out, x, w, m, n, k)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var want, mag float64
				for p := 0; p < k; p++ {
					want += float64(x[i*k+p]) * float64(w[j*k+p])
					mag += math.Abs(float64(x[i*k+p]) * float64(w[j*k+p]))
				}
				if got := float64(out[i*n+j]); math.Abs(got-want) > 1e-6*mag+1e-7 {
					t.Errorf("%v: out[%d,%d] = %g, want %g", s, i, j, got, want)
				}
			}
			// A row's products are the same bits alone as in a batch (rows go in pairs).
			one := make([]float32, n)
			gemvRows(one, x[i*k:(i+1)*k], w, 1, n, k)
			for j := range one {
				if one[j] != out[i*n+j] {
					t.Errorf("%v: out[%d,%d] = %v in the batch, %v alone", s, i, j, out[i*n+j], one[j])
				}
			}
		}
	}
}

// TestDecoderAttentionGrouped: in a decoding step (one new token per sequence) the query heads
// that share a key/value head go through one pair of products, the scores read from the cache's
// packed keys; the output is the same bits as head by head with sgemm (two products per head),
// with caches longer than sgemm's k block (256).
func TestDecoderAttentionGrouped(t *testing.T) {
	cfg := LlamaConfig{Hidden: 384, Layers: 1, Heads: 6, KVHeads: 2, FFN: 8, Vocab: 19, RopeTheta: 1000, RMSEps: 1e-5, MaxPosition: 400, TieEmbeddings: true}
	m, err := NewLlama(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 5))
	dh := cfg.HeadDim()
	qw, kw, group := cfg.Heads*dh, cfg.KVHeads*dh, cfg.Heads/cfg.KVHeads
	lens := []int{300, 7, 1} // cached positions before the new token
	caches := make([]*LlamaCache, len(lens))
	toks := make([][]int, len(lens))
	start := make([]int, len(lens)+1)
	for s, n := range lens {
		if caches[s], err = d.NewCache(n + 1); err != nil {
			t.Fatal(err)
		}
		for i := range caches[s].k[0] {
			caches[s].k[0][i], caches[s].v[0][i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		caches[s].packKeys(0, 0, n+1, cfg.KVHeads, dh)
		caches[s].n = n
		toks[s] = []int{3}
		start[s+1] = s + 1
	}
	d.ones = slices.Repeat([]float32{1}, 301)
	q := make([]float32, len(lens)*qw)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	scale := float32(0.125)
	got := make([]float32, len(q))
	d.attention(got, q, caches, toks, start, 0, scale)
	for s, n := range lens {
		keys := n + 1
		sc, p, want := make([]float32, keys), make([]float32, keys), make([]float32, dh)
		for hd := 0; hd < cfg.Heads; hd++ {
			kvo, qo := (hd/group)*dh, s*qw+hd*dh
			sgemm(false, true, 1, keys, dh, scale, q[qo:], qw, caches[s].k[0][kvo:], kw, 0, sc, keys)
			softmaxRow32(p, sc, d.ones, keys)
			sgemm(false, false, 1, dh, keys, 1, p, keys, caches[s].v[0][kvo:], kw, 0, want, dh)
			for j, v := range want {
				if got[qo+j] != v {
					t.Fatalf("sequence %d head %d value %d: %v grouped, %v head by head", s, hd, j, got[qo+j], v)
				}
			}
		}
	}
}
