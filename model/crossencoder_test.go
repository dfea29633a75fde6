package model

import (
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
// embedding LayerNorm) and to every other parameter, with dropout reseeded
// before every run, for both poolings.
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
			for _, want := range []string{"encoder.embeddings.word", "encoder.embeddings.position", "encoder.embeddings.type", HeadWeight, HeadBias} {
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
	// 5 embedding tensors + 16 per layer + the head's 2.
	if want := 5 + 16*cfg.Layers + 2; len(ps) != want {
		t.Fatalf("%d parameters, want %d", len(ps), want)
	}
	if ps[0].Name != "encoder.embeddings.word" || ps[len(ps)-2].Name != HeadWeight || ps[len(ps)-1].Name != HeadBias {
		t.Errorf("parameter order: first %s, last two %s %s", ps[0].Name, ps[len(ps)-2].Name, ps[len(ps)-1].Name)
	}
	if got := tensorShape(m.Param(HeadWeight)); got != "[1 8]" {
		t.Errorf("head.weight shape %s, want [1 8]", got)
	}
	for _, v := range m.Param(HeadBias).Value.Data().([]float32) {
		if v != 0 {
			t.Errorf("head.bias initialised to %v, want 0", v)
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
