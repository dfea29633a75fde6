package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func tinyTransformer() EncoderConfig {
	return EncoderConfig{Encoder: EncoderTransformer, Vocab: 11, Hidden: 8, Layers: 2, Heads: 2, FFN: 12, MaxPosition: 8}
}

// tinyBatch is B sequences of length L with lengths 5, 3, 1, ... (cycled,
// capped at L), random ids in [2,V) after a 1 ([CLS]), random types.
func tinyBatch(r *rand.Rand, B, L, V int) (ids []int, mask []float32, types []int) {
	ids, mask, types = make([]int, B*L), make([]float32, B*L), make([]int, B*L)
	lens := []int{5, 3, 1, 4}
	for b := 0; b < B; b++ {
		n := min(lens[b%len(lens)], L)
		for l := 0; l < n; l++ {
			ids[b*L+l] = 2 + r.IntN(V-2)
			mask[b*L+l] = 1
			types[b*L+l] = r.IntN(2)
		}
		ids[b*L] = 1
	}
	return
}

// TestTransformerGradients checks the gradient of a loss of both towers'
// outputs with respect to every parameter (8 elements each) against finite
// differences, in float64, with padding, dropout (reseeded before every
// run) and each pooling.
func TestTransformerGradients(t *testing.T) {
	cases := []struct {
		name    string
		shared  bool
		pooling string
		causal  bool
		dropout float64
	}{
		{"shared mean dropout", true, PoolingMean, false, 0.1},
		{"separate cls", false, PoolingCLS, false, 0},
		{"shared causal mean", true, PoolingMean, true, 0.2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyTransformer()
			cfg.Pooling, cfg.Causal, cfg.Dropout = c.pooling, c.causal, c.dropout
			m, err := newBiEncoder(cfg, c.shared, 11, tensor.Float64)
			if err != nil {
				t.Fatal(err)
			}
			const B, L = 3, 5
			pg := newPairGraph(t, m, B, L, true, sumLoss)
			r := rand.New(rand.NewPCG(3, 3))
			qi, qm, qt := tinyBatch(r, B, L, cfg.Vocab)
			pi, pm, pt := tinyBatch(r, B, L, cfg.Vocab)
			if err := pg.qIn.Let(qi, qm, qt); err != nil {
				t.Fatal(err)
			}
			if err := pg.pIn.Let(pi, pm, pt); err != nil {
				t.Fatal(err)
			}
			before := func() { m.SetRNG(rand.New(rand.NewPCG(8, 8))) }
			paramCheck(t, c.name, pg, before, 8, 1e-5)
		})
	}
}

// encodeTokens runs one tower of m (float64, no dropout) on a batch and
// returns the token states [B*L,H] and the pooled vectors [B,H].
func encodeTokens(t *testing.T, tw *Tower, B, L int, ids []int, mask []float32, types []int) (tokens, pooled []float64) {
	t.Helper()
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := newInputs(g, B, L, "x", tw.dt)
	if err := in.Let(ids, mask, types); err != nil {
		t.Fatal(err)
	}
	x, err := tw.BuildTokens(b, in, false)
	if err != nil {
		t.Fatal(err)
	}
	var xv gorgonia.Value
	gorgonia.Read(x, &xv)
	p, err := tw.Build(b, in, false)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	return values(xv), values(p.Value())
}

// repad copies B sequences of length L into length L2 > L with padding
// (padding ids are 7, not 0, so only the mask may hide them).
func repad(ids []int, mask []float32, types []int, B, L, L2 int) ([]int, []float32, []int) {
	i2, m2, t2 := make([]int, B*L2), make([]float32, B*L2), make([]int, B*L2)
	for b := 0; b < B; b++ {
		for l := 0; l < L2; l++ {
			if l < L {
				i2[b*L2+l], m2[b*L2+l], t2[b*L2+l] = ids[b*L+l], mask[b*L+l], types[b*L+l]
			} else {
				i2[b*L2+l], t2[b*L2+l] = 7, 1
			}
		}
	}
	return i2, m2, t2
}

func TestPaddingInvariance(t *testing.T) {
	cfgs := map[string]EncoderConfig{"bow": bowConfig(11, 8)}
	for _, pooling := range []string{PoolingMean, PoolingCLS} {
		cfg := tinyTransformer()
		cfg.Pooling, cfg.Dropout = pooling, 0.1
		cfgs["transformer "+pooling] = cfg
	}
	for name, cfg := range cfgs {
		m, err := newBiEncoder(cfg, true, 2, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		const B, L, L2 = 4, 5, 8
		ids, mask, types := tinyBatch(rand.New(rand.NewPCG(1, 5)), B, L, cfg.Vocab)
		_, short := encodeTokens(t, m.Query, B, L, ids, mask, types)
		i2, m2, t2 := repad(ids, mask, types, B, L, L2)
		_, long := encodeTokens(t, m.Query, B, L2, i2, m2, t2)
		assertClose(t, name+" padded to 8 vs 5", long, short, 1e-12)
	}
}

// TestCausal changes the tokens after position 2 of a sequence: with
// Causal, token states at positions 0..2 stay the same; without, they move.
func TestCausal(t *testing.T) {
	const L, H = 5, 8
	a := []int{1, 4, 5, 6, 7}
	b := []int{1, 4, 5, 9, 2}
	ids := append(append([]int(nil), a...), b...)
	mask := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, causal := range []bool{true, false} {
		cfg := tinyTransformer()
		cfg.Causal = causal
		m, err := newBiEncoder(cfg, true, 4, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := encodeTokens(t, m.Query, 2, L, ids, mask, nil)
		for pos := 0; pos < L; pos++ {
			sa, sb := tok[pos*H:(pos+1)*H], tok[(L+pos)*H:(L+pos+1)*H]
			same := true
			for j := range sa {
				if !close64(sa[j], sb[j], 1e-12) {
					same = false
				}
			}
			if want := causal && pos <= 2; same != want {
				t.Errorf("causal=%t: position %d states equal = %t, want %t", causal, pos, same, want)
			}
		}
	}
}

func TestTransformerDropout(t *testing.T) {
	cfg := tinyTransformer()
	cfg.Dropout = 0.3
	m, err := newBiEncoder(cfg, true, 2, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	const B, L = 2, 5
	ids, mask, types := tinyBatch(rand.New(rand.NewPCG(1, 1)), B, L, cfg.Vocab)
	g := gorgonia.NewGraph()
	in := newInputs(g, B, L, "x", tensor.Float64)
	in.Let(ids, mask, types)
	out, err := m.Query.Build(NewBinder(g), in, true)
	if err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	run := func(seed uint64) []float64 {
		m.SetRNG(rand.New(rand.NewPCG(seed, 0)))
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return values(out.Value())
	}
	a, b, c := run(1), run(2), run(1)
	assertClose(t, "same RNG seed", c, a, 0)
	if a[0] == b[0] {
		t.Error("different RNG seeds gave the same output")
	}
	_, eval := encodeTokens(t, m.Query, B, L, ids, mask, types)
	if eval[0] == a[0] {
		t.Error("inference output equals a dropout output")
	}
}

func TestTransformerParams(t *testing.T) {
	cfg := tinyTransformer()
	m, err := NewBiEncoder(cfg, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps := m.Params()
	if len(ps) != 5+2*16 {
		t.Fatalf("%d params, want 37", len(ps))
	}
	var first []string
	for _, p := range ps[:8] {
		first = append(first, p.Name+fmt.Sprint([]int(p.Value.Shape())))
	}
	want := "encoder.embeddings.word[11 8] encoder.embeddings.position[8 8] encoder.embeddings.type[2 8] encoder.embeddings.norm.weight[8] encoder.embeddings.norm.bias[8] encoder.layer.0.attn.q.weight[8 8] encoder.layer.0.attn.q.bias[8] encoder.layer.0.attn.k.weight[8 8]"
	if got := strings.Join(first, " "); got != want {
		t.Errorf("params\n%s\nwant\n%s", got, want)
	}
	if p := m.Param("encoder.layer.1.ffn.in.weight"); p == nil || !p.Value.Shape().Eq(tensor.Shape{12, 8}) {
		t.Errorf("ffn.in.weight: %v", p)
	}
	if v := values(m.Param("encoder.layer.1.ffn.norm.weight").Value); v[0] != 1 || v[7] != 1 {
		t.Errorf("LayerNorm weight starts at %v, want 1", v)
	}
	for _, p := range ps {
		if _, err := HFBertName(p.Name); err != nil {
			t.Error(err)
		}
	}
}

func TestHFBertName(t *testing.T) {
	cases := []struct{ ours, hf string }{
		{"encoder.embeddings.word", "embeddings.word_embeddings.weight"},
		{"query.embeddings.position", "embeddings.position_embeddings.weight"},
		{"passage.embeddings.type", "embeddings.token_type_embeddings.weight"},
		{"encoder.embeddings.norm.bias", "embeddings.LayerNorm.bias"},
		{"encoder.layer.0.attn.q.weight", "encoder.layer.0.attention.self.query.weight"},
		{"encoder.layer.11.attn.v.bias", "encoder.layer.11.attention.self.value.bias"},
		{"encoder.layer.3.attn.out.weight", "encoder.layer.3.attention.output.dense.weight"},
		{"encoder.layer.3.attn.norm.weight", "encoder.layer.3.attention.output.LayerNorm.weight"},
		{"encoder.layer.2.ffn.in.bias", "encoder.layer.2.intermediate.dense.bias"},
		{"encoder.layer.2.ffn.out.weight", "encoder.layer.2.output.dense.weight"},
		{"encoder.layer.2.ffn.norm.bias", "encoder.layer.2.output.LayerNorm.bias"},
	}
	for _, c := range cases {
		if got, err := HFBertName(c.ours); err != nil || got != c.hf {
			t.Errorf("HFBertName(%q) = %q, %v; want %q", c.ours, got, err, c.hf)
		}
	}
	for _, bad := range []string{"encoder.proj.weight", "encoder.layer.x.attn.q.weight", "encoder.layer.0.attn.q.scale", "word"} {
		if got, err := HFBertName(bad); err == nil {
			t.Errorf("HFBertName(%q) = %q, want an error", bad, got)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	m, _ := NewBiEncoder(tinyTransformer(), true, 1)
	g := gorgonia.NewGraph()
	if _, err := m.Query.Build(NewBinder(g), NewInputs(g, 2, 9, "long"), false); err == nil || !strings.Contains(err.Error(), "sequence length 9 exceeds max_position = 8") {
		t.Errorf("L = 9 > max_position: %v", err)
	}
	if _, err := m.Query.Build(NewBinder(g), newInputs(g, 2, 4, "f64", tensor.Float64), false); err == nil || !strings.Contains(err.Error(), "inputs mask is float64, parameters are float32") {
		t.Errorf("float64 inputs: %v", err)
	}
}
