package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// pairBatchFixture is B pair sequences of length L: [CLS]=1, query tokens
// (type 0), [SEP]=2, passage tokens (type 1), [SEP], padding 0. Lengths
// differ per row, so padding is exercised.
func pairBatchFixture(r *rand.Rand, B, L, V int) (ids []int, mask []float32, types []int) {
	ids, mask, types = make([]int, B*L), make([]float32, B*L), make([]int, B*L)
	for b := 0; b < B; b++ {
		q, p := 1+b%2, 1+(b+1)%3
		row := []int{1}
		for range q {
			row = append(row, 3+r.IntN(V-3))
		}
		row = append(row, 2)
		second := len(row)
		for range p {
			row = append(row, 3+r.IntN(V-3))
		}
		row = append(row, 2)
		if len(row) > L {
			panic("fixture longer than L")
		}
		for l, id := range row {
			ids[b*L+l], mask[b*L+l] = id, 1
			if l >= second {
				types[b*L+l] = 1
			}
		}
	}
	return
}

// scoreGraph builds m.Score on a B x L batch in a fresh graph.
func scoreGraph(t *testing.T, m *CrossEncoder, B, L int, train bool) (*Binder, *Inputs, *gorgonia.Node) {
	t.Helper()
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := newInputs(g, B, L, "pair", m.Encoder.dt)
	s, err := m.Score(b, in, train)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Shape().Eq(tensor.Shape{B}) {
		t.Fatalf("scores have shape %v, want [%d]", s.Shape(), B)
	}
	return b, in, s
}

// TestCrossEncoderGradients checks, in float64 and against central
// differences, the gradient of a weighted sum of the pair scores with respect
// to the inputs' embeddings (word, position and token-type tables, the
// embedding LayerNorm), to BERT's pooler and classifier and to every other
// parameter, with dropout reseeded before every run, for both poolings.
func TestCrossEncoderGradients(t *testing.T) {
	for _, pooling := range []string{PoolingCLS, PoolingMean} {
		t.Run(pooling, func(t *testing.T) {
			cfg := tinyTransformer()
			cfg.Pooling, cfg.Dropout = pooling, 0.1
			m, err := newCrossEncoder(cfg, 5, tensor.Float64)
			if err != nil {
				t.Fatal(err)
			}
			const B, L = 3, 8
			b, in, s := scoreGraph(t, m, B, L, true)
			loss, err := weightedSum(s, 4)
			if err != nil {
				t.Fatal(err)
			}
			ids, mask, types := pairBatchFixture(rand.New(rand.NewPCG(2, 2)), B, L, cfg.Vocab)
			if err := in.Let(ids, mask, types); err != nil {
				t.Fatal(err)
			}
			bound := b.Bound()
			vals := make([]*tensor.Dense, len(bound))
			names := make([]string, len(bound))
			for i, bd := range bound {
				vals[i], names[i] = bd.Param.Value, bd.Param.Name
			}
			for _, want := range []string{"encoder.embeddings.word", "encoder.embeddings.position", "encoder.embeddings.type", PoolerWeight, PoolerBias, ClassifierWeight, ClassifierBias} {
				if !contains(strings.Join(names, " "), want) {
					t.Fatalf("parameter %s is not in the graph", want)
				}
			}
			before := func() { m.SetRNG(rand.New(rand.NewPCG(6, 6))) }
			// The embedding tables get every element that the batch touches checked (the
			// rows of its ids, positions and both types), the others 8 elements each.
			fdCheck(t, pooling, loss, b.Nodes(), vals, names, before, 8, 1e-5)
			emb := []int{0, 1, 2} // word, position, type: the first three bound parameters
			fdCheck(t, pooling+" embeddings", loss, nodesAt(b.Nodes(), emb), tensorsAt(vals, emb), stringsAt(names, emb), before, 1<<20, 1e-5)
			head := []int{len(bound) - 4, len(bound) - 3, len(bound) - 2, len(bound) - 1} // pooler, classifier: every element
			fdCheck(t, pooling+" head", loss, nodesAt(b.Nodes(), head), tensorsAt(vals, head), stringsAt(names, head), before, 1<<20, 1e-5)
		})
	}
}

func nodesAt(ns gorgonia.Nodes, idx []int) []*gorgonia.Node {
	out := make([]*gorgonia.Node, len(idx))
	for i, j := range idx {
		out[i] = ns[j]
	}
	return out
}

func tensorsAt(ts []*tensor.Dense, idx []int) []*tensor.Dense {
	out := make([]*tensor.Dense, len(idx))
	for i, j := range idx {
		out[i] = ts[j]
	}
	return out
}

func stringsAt(s []string, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// TestCrossEncoderReadsTypesAndIgnoresPadding: swapping the token types of a
// pair changes its score (the segment embeddings take part), and padding the
// same pairs to a longer L does not.
func TestCrossEncoderReadsTypesAndIgnoresPadding(t *testing.T) {
	cfg := tinyTransformer()
	cfg.Pooling, cfg.MaxPosition = PoolingCLS, 12
	m, err := newCrossEncoder(cfg, 9, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	const B, L, L2 = 4, 8, 12
	ids, mask, types := pairBatchFixture(rand.New(rand.NewPCG(4, 1)), B, L, cfg.Vocab)
	score := func(L int, ids []int, mask []float32, types []int) []float64 {
		_, in, s := scoreGraph(t, m, B, L, false)
		if err := in.Let(ids, mask, types); err != nil {
			t.Fatal(err)
		}
		runGraph(t, s.Graph())
		return values(s.Value())
	}
	base := score(L, ids, mask, types)
	flipped := append([]int(nil), types...)
	for i := range flipped {
		if mask[i] == 1 {
			flipped[i] = 1 - flipped[i]
		}
	}
	swapped := score(L, ids, mask, flipped)
	for i := range base {
		if close64(base[i], swapped[i], 1e-9) {
			t.Errorf("pair %d: score %.9g does not change when the token types are swapped", i, base[i])
		}
	}
	i2, m2, t2 := repad(ids, mask, types, B, L, L2)
	for i := range t2 {
		if m2[i] == 0 {
			t2[i] = 0 // padding has type 0, as EncodePairBatch writes it
		}
	}
	assertClose(t, "scores padded to 12 vs 8", score(L2, i2, m2, t2), base, 1e-12)
}

// TestScoreRunnerMatchesScoreGraph: the float32 runner, with batches of 3
// over 7 pairs (a partial last batch), gives the scores of one inference graph
// over all 7.
func TestScoreRunnerMatchesScoreGraph(t *testing.T) {
	cfg := tinyTransformer()
	cfg.Pooling, cfg.Dropout = PoolingCLS, 0.1
	m, err := NewCrossEncoder(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	const n, L = 7, 8
	ids, mask, types := pairBatchFixture(rand.New(rand.NewPCG(8, 8)), n, L, cfg.Vocab)
	_, in, s := scoreGraph(t, m, n, L, false)
	if err := in.Let(ids, mask, types); err != nil {
		t.Fatal(err)
	}
	runGraph(t, s.Graph())
	want := values(s.Value())
	r, err := NewScoreRunner(m, 3, L)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Score(ids, mask, types, n)
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "runner scores", f32s(got), want, 1e-5)
	if _, err := r.Score(ids[:L], mask[:L], types[:L], 2); err == nil {
		t.Error("Score accepted 2 pairs with the ids of 1")
	}
}

func TestCrossEncoderParamsAndErrors(t *testing.T) {
	cfg := tinyTransformer()
	m, err := NewCrossEncoder(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	ps := m.Params()
	// 5 embedding tensors + 16 per layer + the pooler's 2 + the classifier's 2.
	if want := 5 + 16*cfg.Layers + 4; len(ps) != want {
		t.Fatalf("%d parameters, want %d", len(ps), want)
	}
	var last []string
	for _, p := range ps[len(ps)-4:] {
		last = append(last, p.Name+tensorShape(p))
	}
	if ps[0].Name != "encoder.embeddings.word" || strings.Join(last, " ") != "pooler.weight[8 8] pooler.bias[8] classifier.weight[1 8] classifier.bias[1]" {
		t.Errorf("parameters: first %s, last four %v", ps[0].Name, last)
	}
	for _, name := range []string{PoolerBias, ClassifierBias} {
		for _, v := range m.Param(name).Value.Data().([]float32) {
			if v != 0 {
				t.Errorf("%s initialised to %v, want 0", name, v)
			}
		}
	}
	hf := map[string]string{
		"encoder.embeddings.word":       "bert.embeddings.word_embeddings.weight",
		"encoder.layer.1.ffn.norm.bias": "bert.encoder.layer.1.output.LayerNorm.bias",
		"encoder.layer.0.attn.q.weight": "bert.encoder.layer.0.attention.self.query.weight",
		PoolerWeight:                    "bert.pooler.dense.weight",
		PoolerBias:                      "bert.pooler.dense.bias",
		ClassifierWeight:                "classifier.weight",
		ClassifierBias:                  "classifier.bias",
	}
	for ours, want := range hf {
		if got, err := HFCrossEncoderName(ours); err != nil || got != want {
			t.Errorf("HFCrossEncoderName(%q) = %q, %v; want %q", ours, got, err, want)
		}
	}
	for _, bad := range []string{"query.embeddings.word", "head.weight", "pooler.dense.weight"} {
		if _, err := HFCrossEncoderName(bad); err == nil {
			t.Errorf("HFCrossEncoderName(%q) accepted", bad)
		}
	}
	// Same seed, same weights; the encoder draws as a shared bi-encoder tower does.
	bi, err := NewBiEncoder(cfg, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range bi.Params() {
		a, b := p.Value.Data().([]float32), ps[i].Value.Data().([]float32)
		if p.Name != ps[i].Name || a[len(a)-1] != b[len(b)-1] {
			t.Fatalf("parameter %d: bi-encoder %s, cross-encoder %s differ", i, p.Name, ps[i].Name)
		}
	}

	bow := bowConfig(11, 8)
	if _, err := NewCrossEncoder(bow, 1); err == nil || !strings.Contains(err.Error(), "token types") {
		t.Errorf("bow cross-encoder: err = %v", err)
	}
	causal := tinyTransformer()
	causal.Causal = true
	if _, err := NewCrossEncoder(causal, 1); err == nil {
		t.Error("causal cross-encoder accepted")
	}
	if _, err := NewScoreRunner(m, 0, 8); err == nil {
		t.Error("runner with batch 0 accepted")
	}
}

// TestCrossEncoderInitMatching: the word embeddings are scaled, the gain lands on the
// diagonals of the first layer's query and key projections, and nothing else changes; bad
// arguments are refused.
func TestCrossEncoderInitMatching(t *testing.T) {
	cfg := tinyTransformer()
	cfg.Pooling = PoolingCLS
	plain, err := NewCrossEncoder(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewCrossEncoder(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.InitMatching(1.5, 4); err != nil {
		t.Fatal(err)
	}
	h := cfg.Hidden
	for i, p := range m.Params() {
		a, b := plain.Params()[i].Value.Data().([]float32), p.Value.Data().([]float32)
		for j := range a {
			want := a[j]
			switch {
			case p.Name == "encoder.embeddings.word":
				want *= 4
			case (p.Name == "encoder.layer.0.attn.q.weight" || p.Name == "encoder.layer.0.attn.k.weight") && j/h == j%h:
				want += 1.5
			}
			if b[j] != want {
				t.Fatalf("%s[%d] = %v, want %v", p.Name, j, b[j], want)
			}
		}
	}
	for _, bad := range [][2]float64{{-1, 1}, {1, 0}, {math.NaN(), 1}, {1, math.Inf(1)}} {
		if err := m.InitMatching(bad[0], bad[1]); err == nil {
			t.Errorf("InitMatching(%v, %v) accepted", bad[0], bad[1])
		}
	}
}
