package colbert

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// testVocab is a tiny BERT vocabulary with the markers, [MASK] and some punctuation.
var testVocab = []string{"[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!",
	"the", "cat", "sat", "on", "mat", "dog", "ran", "a", "big", "red", "fish", "swam", "in", "sea", "blue", "sky"}

func testTokenizer(t *testing.T) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.FromVocab(testVocab, tokenize.DefaultVocabOptions())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func testConfig(v int) Config {
	return Config{Encoder: model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: v, Hidden: 8, Layers: 1, Heads: 2, FFN: 16, MaxPosition: 32},
		Dim: 4, QueryLength: 8, DocumentLength: 12}
}

func TestMarkersAndPadding(t *testing.T) {
	tok := testTokenizer(t)
	m, err := New(testConfig(tok.VocabSize()), 1)
	if err != nil {
		t.Fatal(err)
	}
	mk, err := MarkersOf(tok)
	if err != nil {
		t.Fatal(err)
	}
	if mk.Query != 1 || mk.Document != 2 || mk.Mask != 6 || len(mk.Skip) != 3 || !mk.Skip[7] || !mk.Skip[8] || !mk.Skip[9] {
		t.Fatalf("markers %+v", mk)
	}
	q := m.EncodeQueries(tok, mk, []string{"the cat sat"})
	// [CLS] [Q] the cat sat [SEP] [MASK] [MASK]; the [MASK]s not attended, every token scored
	if want := []int{4, 1, 10, 11, 12, 5, 6, 6}; !slices.Equal(q.IDs, want) {
		t.Fatalf("query ids %v, want %v", q.IDs, want)
	}
	if want := []float32{1, 1, 1, 1, 1, 1, 0, 0}; !slices.Equal(q.Mask, want) {
		t.Fatalf("query attention %v, want %v", q.Mask, want)
	}
	if slices.Contains(q.Score, 0) {
		t.Fatalf("query scored %v, want all 1", q.Score)
	}
	m.Cfg.AttendExpansion = true
	if q := m.EncodeQueries(tok, mk, []string{"the cat sat"}); slices.Contains(q.Mask, 0) {
		t.Fatalf("attend_to_expansion_tokens: attention %v", q.Mask)
	}
	// a query longer than QueryLength-1 tokens is cut and keeps [SEP]
	q = m.EncodeQueries(tok, mk, []string{"the cat sat on the mat the dog ran"})
	if want := []int{4, 1, 10, 11, 12, 13, 10, 5}; !slices.Equal(q.IDs, want) || q.Truncated != 1 {
		t.Fatalf("cut query ids %v (truncated %d), want %v", q.IDs, q.Truncated, want)
	}
	d := m.EncodeDocuments(tok, mk, []string{"the cat, sat!", "a fish."})
	if want := []int{4, 2, 10, 11, 8, 12, 9, 5, 0, 0, 0, 0}; !slices.Equal(d.Row(0), want) {
		t.Fatalf("document ids %v, want %v", d.Row(0), want)
	}
	if want := []float32{1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0}; !slices.Equal(d.Score[:12], want) {
		t.Fatalf("document scored %v, want %v (punctuation and padding out)", d.Score[:12], want)
	}
	if want := []float32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}; !slices.Equal(d.Mask[:12], want) {
		t.Fatalf("document attention %v, want %v (punctuation attended)", d.Mask[:12], want)
	}
}

var texts = []string{"the cat sat on the mat.", "a big red fish swam in the blue sea", "the dog ran!", "sky", "the red dog, the blue cat"}

// The encoder's vectors are unit rows, one per scored token, and do not depend on the batch
// size or the padding (B = 1 against B = 3, length buckets); Exact's scores are MaxSimScore's.
func TestEncoderAndExact(t *testing.T) {
	tok := testTokenizer(t)
	m, err := New(testConfig(tok.VocabSize()), 3)
	if err != nil {
		t.Fatal(err)
	}
	e1, _ := NewEncoder(m, tok, 1)
	e3, _ := NewEncoder(m, tok, 3)
	d1, err := e1.Documents(texts)
	if err != nil {
		t.Fatal(err)
	}
	d3, err := e3.Documents(texts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d1.Offs, d3.Offs) {
		t.Fatalf("offsets %v vs %v", d1.Offs, d3.Offs)
	}
	// "the cat sat on the mat." is [CLS] [D] 6 words [SEP] with "." skipped: 9 scored tokens
	if d1.Count(0) != 9 || d1.Count(3) != 4 {
		t.Fatalf("scored tokens %d and %d, want 9 and 4", d1.Count(0), d1.Count(3))
	}
	for i, v := range d1.Vecs {
		if math.Abs(float64(v-d3.Vecs[i])) > 1e-5 {
			t.Fatalf("value %d: %v with B=1, %v with B=3", i, v, d3.Vecs[i])
		}
	}
	for r := range len(d1.Vecs) / 4 {
		var s float64
		for _, x := range d1.Vecs[r*4 : r*4+4] {
			s += float64(x) * float64(x)
		}
		if math.Abs(s-1) > 1e-5 {
			t.Fatalf("row %d has squared norm %v", r, s)
		}
	}
	q, err := e3.Queries([]string{"red fish", "the cat"})
	if err != nil {
		t.Fatal(err)
	}
	if q.Count(0) != 8 || q.Count(1) != 8 {
		t.Fatalf("query tokens %d, %d, want 8 (QueryLength)", q.Count(0), q.Count(1))
	}
	x, _ := NewExact([]string{"a", "b", "c", "d", "e"}, d1)
	s := x.Scores(q.Rows(0))
	for i := range texts {
		if want := MaxSimScore(q.Rows(0), d1.Rows(i), 4); math.Abs(s[i]-want) > 1e-5 {
			t.Fatalf("passage %d: exact %v, MaxSimScore %v", i, s[i], want)
		}
	}
	hits := x.Search(q.Rows(0), 2)
	if len(hits) != 2 || hits[0].Score < hits[1].Score || hits[0].Score != slices.Max(s) {
		t.Fatalf("hits %v for scores %v", hits, s)
	}
}

// The training graph's loss (no dropout) is InfoNCE over the scores the encoder and MaxSimScore
// give: the training and the search paths compute one model. With Loss.Masked, the passages
// Batch.Mask zeroes leave their query's softmax (query 0 without passage 3).
func TestGraphLossMatchesSearchPath(t *testing.T) {
	tok := testTokenizer(t)
	m, err := NewOf(testConfig(tok.VocabSize()), 5, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	mk, _ := MarkersOf(tok)
	e, _ := NewEncoder(m, tok, 2)
	for _, mask := range [][]float32{nil, {1, 1, 1, 0, 1, 1, 1, 1}} {
		b := Batch{Queries: []string{"red fish", "the cat"}, Passages: texts[:4], Mask: mask}
		g, err := NewGraph(m, 2, 4, Loss{Name: "colbert_contrastive", Temperature: 0.5, Masked: mask != nil}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Fill(m, tok, mk, b, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := g.VM.RunAll(); err != nil {
			t.Fatal(err)
		}
		got := g.Loss.Value().Data().(float64)
		q, _ := e.Queries(b.Queries)
		d, _ := e.Documents(b.Passages)
		var want float64
		for i := range 2 {
			var z float64
			for j := range 4 {
				if mask == nil || mask[i*4+j] != 0 {
					z += math.Exp(MaxSimScore(q.Rows(i), d.Rows(j), 4) / 0.5)
				}
			}
			want += -(MaxSimScore(q.Rows(i), d.Rows(i), 4)/0.5 - math.Log(z)) / 2
		}
		if math.Abs(got-want) > 1e-5*math.Abs(want) {
			t.Fatalf("mask %v: graph loss %v, search-path loss %v", mask, got, want)
		}
		g.VM.Close()
	}
	g, err := NewGraph(m, 2, 4, Loss{Name: "colbert_contrastive", Temperature: 0.5}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.VM.Close()
	if err := g.Fill(m, tok, mk, Batch{Queries: []string{"a", "b"}, Passages: texts[:4], Mask: make([]float32, 8)}, nil, nil); err == nil {
		t.Error("a candidate mask is accepted by a graph built without Loss.Masked")
	}
	if _, err := NewGraph(m, 2, 4, Loss{Name: "colbert_kl_distill", Temperature: 1, TeacherTemperature: 1, Masked: true}, false); err == nil {
		t.Error("colbert_kl_distill accepts a candidate mask")
	}
}

// Finite differences of the loss in the projection and in the encoder's last LayerNorm and
// word embeddings (float64), for both ColBERT losses.
func TestProjectionGradientFD(t *testing.T) {
	tok := testTokenizer(t)
	for _, loss := range []Loss{{Name: "colbert_contrastive", Temperature: 0.3}, {Name: "colbert_kl_distill", Temperature: 1, TeacherTemperature: 1}} {
		m, err := NewOf(testConfig(tok.VocabSize()), 7, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		mk, _ := MarkersOf(tok)
		b := Batch{Queries: []string{"red fish", "the cat"}, Passages: texts[:4]}
		if loss.Name == "colbert_kl_distill" {
			b.Teacher = []float32{3, 1, 0.5, 2}
		}
		g, err := NewGraph(m, 2, 4, loss, false)
		if err != nil {
			t.Fatal(err)
		}
		run := func() float64 {
			g.VM.Reset()
			if err := g.Fill(m, tok, mk, b, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := g.VM.RunAll(); err != nil {
				t.Fatal(err)
			}
			return g.Loss.Value().Data().(float64)
		}
		run()
		grads := map[string][]float64{}
		for _, bd := range g.Binder.Bound() {
			gv, err := bd.Node.Grad()
			if err != nil {
				t.Fatal(err)
			}
			grads[bd.Param.Name] = slices.Clone(gv.Data().([]float64))
		}
		checked := 0
		for _, p := range m.Params() {
			if p.Name != ProjName && p.Name != "encoder.embeddings.word" && p.Name != "encoder.layer.0.ffn.norm.weight" {
				continue
			}
			w := p.Value.Data().([]float64)
			for _, i := range []int{0, 5, len(w) / 2, len(w) - 1} {
				if p.Name == "encoder.embeddings.word" {
					i = 10*8 + i%8 // "the"'s row: in the batch
				}
				old := w[i]
				const h = 1e-5
				w[i] = old + h
				up := run()
				w[i] = old - h
				down := run()
				w[i] = old
				fd := (up - down) / (2 * h)
				if an := grads[p.Name][i]; math.Abs(fd-an) > 1e-6+1e-4*math.Abs(fd) {
					t.Fatalf("%s: %s[%d]: analytic %v, finite differences %v", loss.Name, p.Name, i, an, fd)
				}
				checked++
			}
		}
		if checked < 8 {
			t.Fatalf("%s: %d values checked", loss.Name, checked)
		}
		g.VM.Close()
	}
}

// TestEncoderRowsDoNotChangeVectors: the Encoder sizes a graph to the texts it runs (graphRows:
// B when they fill it, else their count rounded up to a power of two), so a lone query runs a
// 1-row graph. With MiniLM's widths (H 384, 12 heads, FFN 1536, dim 128; random weights) a
// text's token vectors are the same bits whatever the rows beside it: 33 queries in one call of
// B 32 and one per call; 33 passages in one batch of a 33-row graph (B 33) and of a 64-row one
// (B 64). So on the assembly kernels (AVX2, AVX-512); gonum's Sgemm, where they are missing
// (-tags noasm, CPUs without AVX2), blocks its sums by the matrix's rows: there within 1e-6.
func TestEncoderRowsDoNotChangeVectors(t *testing.T) {
	tok := testTokenizer(t)
	same := func(a, b []float32) bool {
		if strings.HasPrefix(model.BLAS(), "Go AVX") {
			return slices.Equal(a, b)
		}
		return len(a) == len(b) && maxDiff(a, b) <= 1e-6
	}
	cfg := Config{Encoder: model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 384,
		Layers: 1, Heads: 12, FFN: 1536, MaxPosition: 64}, Dim: 128, QueryLength: 32, DocumentLength: 48}
	m, err := New(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 1))
	qs, ds := make([]string, 33), make([]string, 33)
	for i := range qs {
		qs[i], ds[i] = randomText(r, 2+r.IntN(20)), randomText(r, 5+r.IntN(40))
	}
	e32, _ := NewEncoder(m, tok, 32)
	defer e32.Close()
	all, err := e32.Queries(qs)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		one, err := e32.Queries([]string{q})
		if err != nil {
			t.Fatal(err)
		}
		if !same(one.Vecs, all.Rows(i)) {
			t.Fatalf("query %d alone differs from its row in a call of 33", i)
		}
	}
	if e32.graphs[graphKey{1, 32}] == nil || e32.graphs[graphKey{32, 32}] == nil {
		t.Errorf("graphs %v, want 1 x 32 and 32 x 32 among them", slices.Collect(maps.Keys(e32.graphs)))
	}
	if got := []int{e32.graphRows(1), e32.graphRows(3), e32.graphRows(17), e32.graphRows(40)}; !slices.Equal(got, []int{1, 4, 32, 32}) {
		t.Errorf("graphRows of 1, 3, 17, 40 texts at B 32: %v, want [1 4 32 32]", got)
	}
	e33, _ := NewEncoder(m, tok, 33)
	defer e33.Close()
	e64, _ := NewEncoder(m, tok, 64)
	defer e64.Close()
	d33, err := e33.Documents(ds)
	if err != nil {
		t.Fatal(err)
	}
	d64, err := e64.Documents(ds)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d33.Offs, d64.Offs) || !same(d33.Vecs, d64.Vecs) {
		t.Fatalf("passages through a 33-row and a 64-row graph differ")
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// BenchmarkEncoderLoneQuery encodes one query at a time (padded to 32 tokens with [MASK]) with a
// model of all-MiniLM-L6-v2's shape (6 layers, H 384, 12 heads, FFN 1536, dim 128; random
// weights) and the recipe's encode batch of 32: the encoding half of a ColBERT query's latency
// (metrics.json "colbert/query_milliseconds").
func BenchmarkEncoderLoneQuery(b *testing.B) {
	tok, err := tokenize.FromVocab(testVocab, tokenize.DefaultVocabOptions())
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Encoder: model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 384,
		Layers: 6, Heads: 12, FFN: 1536, MaxPosition: 512}, Dim: 128, QueryLength: 32, DocumentLength: 180}
	m, err := New(cfg, 5)
	if err != nil {
		b.Fatal(err)
	}
	e, _ := NewEncoder(m, tok, 32)
	defer e.Close()
	q := []string{"the big red fish swam in the blue sea"}
	if _, err := e.Queries(q); err != nil { // the graph is built outside the timing
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := e.Queries(q); err != nil {
			b.Fatal(err)
		}
	}
}
