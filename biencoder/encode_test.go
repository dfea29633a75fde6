package biencoder

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

func bertTokenizer(t testing.TB) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Load("../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// words are one WordPiece token each in BERT's uncased vocabulary (checked by wordTexts).
var words = strings.Fields("the wing of an aircraft at high speed heat transfer in a boundary layer shock waves on cone flow pressure")

// wordTexts returns one text of n[i] words each, drawn with a PCG seeded with seed.
func wordTexts(t testing.TB, tok *tokenize.Tokenizer, n []int, seed uint64) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	texts := make([]string, len(n))
	for i, k := range n {
		w := make([]string, k)
		for j := range w {
			w[j] = words[r.IntN(len(words))]
		}
		texts[i] = strings.Join(w, " ")
		if got := len(tok.Encode(texts[i])); got != k {
			t.Fatalf("text %d: %d tokens, want %d (one a word)", i, got, k)
		}
	}
	return texts
}

// randomize gives every parameter N(0, std²) values (LayerNorm weights 1 + N(0, std²)), so
// attention is far from uniform and a padding leak would show.
func randomize(m *model.BiEncoder, std float64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 2))
	for _, p := range m.Params() {
		v := p.Value.Data().([]float32)
		base := 0.0
		if strings.HasSuffix(p.Name, "norm.weight") {
			base = 1
		}
		for i := range v {
			v[i] = float32(base + std*r.NormFloat64())
		}
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestEncoderDynamicMatchesFixed encodes 150 texts of 0 to 129 words (one token a word) to at
// most 96 tokens, in an order unrelated to their lengths, with fixed padding (EncodeTexts: every
// text to 96) and with dynamic padding (batches of 64 length-sorted texts, each padded to a
// multiple of 32): the vectors, in input order, agree within 1e-6 and the truncation counts are
// the same. Three towers: a transformer with mean pooling and one with [CLS] pooling (H 32, 2
// layers, 4 heads, random weights), and bow.
func TestEncoderDynamicMatchesFixed(t *testing.T) {
	tok := bertTokenizer(t)
	const maxLen = 96
	n := make([]int, 150)
	for i := range n {
		n[i] = i * 37 % 130 // every count 0..129 once, plus 20 repeated (ties)
	}
	texts := wordTexts(t, tok, n, 1)
	// Each word is one token: a text of k words is k+2 tokens, cut when k > 94.
	cut, tokens, dropped := 0, 0, 0
	for _, k := range n {
		tokens += k
		if k > maxLen-2 {
			cut++
			dropped += k - (maxLen - 2)
		}
	}
	wantCut := fmt.Sprintf("%d of %d cut (%.1f%% of their tokens dropped)", cut, len(n), 100*float64(dropped)/float64(tokens))
	if cut == 0 || cut == len(n) {
		t.Fatalf("%d of %d texts cut: the test wants some cut and some not", cut, len(n))
	}
	// Sorted by length, batches padded to 96 tokens hold EncodeTokens/96 = 42 texts (the
	// longest, cut to 96 tokens, then those padded to 96), then batches of 64 padded to 64 and
	// 32 (dynamicRows): graphs for 32, 64 and 96.
	wantLengths := []int{32, 64, 96}

	transformer := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 32, Layers: 2,
		Heads: 4, FFN: 64, MaxPosition: 128}
	cls := transformer
	cls.Pooling = model.PoolingCLS
	for _, tc := range []struct {
		name string
		cfg  model.EncoderConfig
	}{
		{"transformer", transformer},
		{"transformer-cls", cls},
		{"bow", model.EncoderConfig{Encoder: model.EncoderBow, Vocab: tok.VocabSize(), Hidden: 32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.NewBiEncoder(tc.cfg, true, 7)
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, 0.3, 7)
			var fixedCut, dynCut tokenize.TruncCount
			fixed, err := EncodeTexts(m.Passage, tok, texts, maxLen, &fixedCut)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := NewEncoder(m.Passage, tok, maxLen, true)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			dyn, err := enc.Encode(texts, &dynCut)
			if err != nil {
				t.Fatal(err)
			}
			if len(dyn) != len(fixed) || len(fixed) != len(texts)*32 {
				t.Fatalf("%d dynamic values, %d fixed, want %d", len(dyn), len(fixed), len(texts)*32)
			}
			d := maxAbsDiff(dyn, fixed)
			t.Logf("max |dynamic - fixed| = %.3g over %d values", d, len(fixed))
			if d > 1e-6 {
				t.Errorf("dynamic padding differs from fixed padding by %.3g (> 1e-6)", d)
			}
			// The vectors differ from text to text (so a permutation would show).
			if s := maxAbsDiff(fixed[:32], fixed[32:64]); s < 1e-3 {
				t.Errorf("texts 0 and 1 have vectors %.3g apart: the towers hardly tell texts apart", s)
			}
			if dynCut != fixedCut || fixedCut.String() != wantCut {
				t.Errorf("truncation: dynamic %v, fixed %v, want %v", dynCut, fixedCut, wantCut)
			}
			if got := enc.PaddedLengths(); !slices.Equal(got, wantLengths) {
				t.Errorf("graphs for padded lengths %v, want %v", got, wantLengths)
			}
			// A second call reuses the graphs and gives the same vectors, bit for bit.
			again, err := enc.Encode(texts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again, dyn) {
				t.Errorf("a second Encode differs by %.3g", maxAbsDiff(again, dyn))
			}
			if got := enc.PaddedLengths(); !slices.Equal(got, wantLengths) {
				t.Errorf("after a second Encode: graphs for padded lengths %v, want %v", got, wantLengths)
			}
			// EncodeIDs on the same texts tokenized beforehand runs the plan DynamicBatches
			// gives and the same graphs: the same vectors, bit for bit.
			seqs, lengths := make([][]int, len(texts)), make([]int, len(texts))
			for i := range texts {
				b := tok.EncodeBatch(texts[i:i+1], maxLen)
				for lengths[i] < b.L && b.Mask[lengths[i]] != 0 {
					lengths[i]++
				}
				seqs[i] = b.IDs[:lengths[i]]
			}
			ids, err := enc.EncodeIDs(seqs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, dyn) {
				t.Errorf("EncodeIDs differs from Encode by %.3g", maxAbsDiff(ids, dyn))
			}
			plan, seen := DynamicBatches(lengths, maxLen), map[int]bool{}
			rows := 0
			for _, b := range plan {
				seen[b.L] = true
				rows += len(b.Rows)
				if len(b.Rows) != dynamicRows(b.L) && rows != len(texts) {
					t.Errorf("a batch of %d rows padded to %d before the last", len(b.Rows), b.L)
				}
			}
			if got := slices.Sorted(maps.Keys(seen)); rows != len(texts) || !slices.Equal(got, wantLengths) {
				t.Errorf("DynamicBatches: %d rows padded to %v, want %d to %v", rows, got, len(texts), wantLengths)
			}
		})
	}
}

// TestPaddingLeakWouldShow is the control of TestEncoderDynamicMatchesFixed: unmasking one
// padding position of a text moves its transformer vector by far more than the 1e-6 that test
// allows, so a leak of padding into attention or pooling would fail it.
func TestPaddingLeakWouldShow(t *testing.T) {
	tok := bertTokenizer(t)
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 32,
		Layers: 2, Heads: 4, FFN: 64, MaxPosition: 32}, true, 7)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 0.3, 7)
	const L = 32
	b := tok.EncodeBatch(wordTexts(t, tok, []int{10}, 3), L)
	r, err := model.NewEncoderRunner(m.Passage, 1, L)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	clean, err := r.Encode(b.IDs, b.Mask, b.Types, 1)
	if err != nil {
		t.Fatal(err)
	}
	leak := slices.Clone(b.Mask)
	leak[20] = 1 // a [PAD] position
	leaked, err := r.Encode(b.IDs, leak, b.Types, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(clean, leaked); d < 1e-3 {
		t.Errorf("one unmasked padding position moves the vector by %.3g only", d)
	} else {
		t.Logf("one unmasked padding position moves the vector by %.3g", d)
	}
}

// TestPaddedLen checks the bucket rule: up to a multiple of 32, at most the maximum length.
func TestPaddedLen(t *testing.T) {
	for _, c := range []struct{ n, maxLen, want int }{
		{2, 256, 32}, {32, 256, 32}, {33, 256, 64}, {250, 256, 256}, {256, 256, 256}, {40, 50, 50}, {20, 50, 32},
	} {
		if got := PaddedLen(c.n, c.maxLen); got != c.want {
			t.Errorf("PaddedLen(%d, %d) = %d, want %d", c.n, c.maxLen, got, c.want)
		}
	}
}

// TestSearcherLengthsAndDynamic searches a corpus with queries cut to 8 tokens and passages to
// 48: without Dynamic the hits are bit for bit those of encoding each side with EncodeTexts at
// its own length and an exact index, with Dynamic the same documents in the same order with
// scores within 1e-5 (cosine similarity of vectors within 1e-6); the truncation counts are
// those of each side's length.
func TestSearcherLengthsAndDynamic(t *testing.T) {
	tok := bertTokenizer(t)
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 32,
		Layers: 2, Heads: 4, FFN: 64, MaxPosition: 64}, false, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 0.3, 3)
	pn := make([]int, 70)
	for i := range pn {
		pn[i] = 1 + i*13%60 // 1 to 60 words: the ones over 46 are cut
	}
	passages := wordTexts(t, tok, pn, 4)
	ids := make([]string, len(passages))
	for i := range ids {
		ids[i] = fmt.Sprintf("d%d", i)
	}
	queries := wordTexts(t, tok, []int{1, 3, 6, 9, 2}, 5) // the 9-word query is cut to 6
	lens := Lengths{Query: 8, Passage: 48}

	pv, err := EncodeTexts(m.Passage, tok, passages, lens.Passage, nil)
	if err != nil {
		t.Fatal(err)
	}
	NormalizeRows(pv, 32)
	flat, err := index.NewFlat(ids, pv, 32)
	if err != nil {
		t.Fatal(err)
	}
	qv, err := EncodeTexts(m.Query, tok, queries, lens.Query, nil)
	if err != nil {
		t.Fatal(err)
	}
	NormalizeRows(qv, 32)
	want := flat.SearchBatch(qv, 10)

	// The third searcher indexes the 70 passages in an HNSW graph (ANNThreshold 70), whose
	// efSearch of 64 reaches every node here: the same hits, scored as Flat scores them.
	for i, dynamic := range []bool{false, true, false} {
		opt := SearchOptions{Len: lens, Cosine: true, Dynamic: dynamic}
		if i == 2 {
			opt.ANNThreshold, opt.ANN = 70, ann.Params{Seed: 3}
		}
		s, err := NewSearcher(m, tok, opt, ids, passages)
		if err != nil {
			t.Fatal(err)
		}
		if d := s.Describe(); (i == 2) != (s.HNSW() != nil) ||
			(i < 2 && d != "exact search over 70 passages") ||
			(i == 2 && !strings.HasPrefix(d, "HNSW over 70 passages (M 16, efConstruction 200, efSearch 64), built in ")) {
			t.Errorf("searcher %d: HNSW %v, Describe %q", i, s.HNSW() != nil, d)
		}
		got, err := s.Search(queries, 10)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		for q := range want {
			for j, h := range want[q] {
				g := got[q][j]
				if g.DocID != h.DocID || (!dynamic && g.Score != h.Score) || math.Abs(float64(g.Score-h.Score)) > 1e-5 {
					t.Errorf("dynamic %t: query %d hit %d: %s %v, want %s %v", dynamic, q, j, g.DocID, g.Score, h.DocID, h.Score)
				}
			}
		}
		if got, want := s.QueryCut.String(), "1 of 5 cut (14.3% of their tokens dropped)"; got != want {
			t.Errorf("dynamic %t: queries: %s, want %s", dynamic, got, want)
		}
		// 1..60 words once and 10 more of 1..58 (2125 tokens); 47..60, 53 and 58 words are cut to
		// 46, losing 105 + 7 + 12 = 124 tokens.
		if got, want := s.PassageCut.String(), "16 of 70 cut (5.8% of their tokens dropped)"; got != want {
			t.Errorf("dynamic %t: passages: %s, want %s", dynamic, got, want)
		}
	}
}

// sciFactLengths draws n text lengths in tokens from a log-normal like SciFact's abstracts
// (median 316 WordPiece tokens, 90th percentile 502: sigma = ln(502/316)/1.2816) or, with
// median 20 and the same spread, like its claims.
func sciFactLengths(n int, median float64, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 3))
	sigma := math.Log(502.0/316) / 1.2816
	out := make([]int, n)
	for i := range out {
		out[i] = max(1, int(math.Round(median*math.Exp(sigma*r.NormFloat64()))))
	}
	return out
}

// BenchmarkEncode encodes 128 texts of SciFact-like lengths with fixed padding (every text to
// the maximum length) and with dynamic padding, on a transformer tower of H 64, 2 layers, 4 heads
// (random weights). The graphs are built before the timer starts, as an Encoder's cache holds
// them after its first call. padded_tokens/text is what the graphs run per text (rows of the
// last partial batch included).
func BenchmarkEncode(b *testing.B) {
	tok := bertTokenizer(b)
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 64,
		Layers: 2, Heads: 4, FFN: 256, MaxPosition: 512}, true, 1)
	if err != nil {
		b.Fatal(err)
	}
	passages := wordTexts(b, tok, sciFactLengths(128, 316, 1), 1)
	claims := wordTexts(b, tok, sciFactLengths(128, 20, 2), 2)
	for _, c := range []struct {
		name   string
		texts  []string
		maxLen int
	}{
		{"abstracts-256", passages, 256},
		{"abstracts-512", passages, 512},
		{"claims-256", claims, 256},
	} {
		for _, dynamic := range []bool{false, true} {
			name := c.name + "/fixed"
			if dynamic {
				name = c.name + "/dynamic"
			}
			b.Run(name, func(b *testing.B) {
				enc, err := NewEncoder(m.Passage, tok, c.maxLen, dynamic)
				if err != nil {
					b.Fatal(err)
				}
				defer enc.Close()
				if _, err := enc.Encode(c.texts, nil); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				cpu0 := cpuTime()
				for b.Loop() {
					if _, err := enc.Encode(c.texts, nil); err != nil {
						b.Fatal(err)
					}
				}
				// CPU time is steadier than wall time on a shared machine.
				b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(paddedTokens(tok, c.texts, c.maxLen, dynamic))/float64(len(c.texts)), "padded_tokens/text")
				b.ReportMetric(float64(len(enc.PaddedLengths())), "graphs")
			})
		}
	}
}

// paddedTokens is the number of positions the Encoder's graphs run for texts: batches of
// EncodeBatchSize rows (the last one padded with empty rows), each of the maximum length or,
// dynamic, of PaddedLen of its longest text.
func paddedTokens(tok *tokenize.Tokenizer, texts []string, maxLen int, dynamic bool) int {
	lens := make([]int, len(texts))
	for i, s := range texts {
		lens[i] = min(len(tok.Encode(s))+2, maxLen)
	}
	slices.SortFunc(lens, func(a, b int) int { return b - a })
	n := 0
	for lo := 0; lo < len(lens); lo += EncodeBatchSize {
		L := maxLen
		if dynamic {
			L = PaddedLen(lens[lo], maxLen)
		}
		n += EncodeBatchSize * L
	}
	return n
}

// TestEncodeTokenizedMatchesEncode encodes 80 texts of 0 to 129 words from their token ids
// (as a tokenized passage store returns them) and from the texts, with fixed and dynamic
// padding: the vectors are the same bits and the truncation counts the same.
func TestEncodeTokenizedMatchesEncode(t *testing.T) {
	tok := bertTokenizer(t)
	n := make([]int, 80)
	for i := range n {
		n[i] = i * 53 % 130
	}
	texts := wordTexts(t, tok, n, 3)
	tokens := make([][]int, len(texts))
	for i, s := range texts {
		tokens[i] = tok.Encode(s)
	}
	for _, cfg := range []model.EncoderConfig{
		{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 32, Layers: 2, Heads: 4, FFN: 64, MaxPosition: 128},
		{Encoder: model.EncoderBow, Vocab: tok.VocabSize(), Hidden: 32},
	} {
		m, err := model.NewBiEncoder(cfg, true, 9)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m, 0.3, 9)
		for _, dynamic := range []bool{false, true} {
			enc, err := NewEncoder(m.Passage, tok, 96, dynamic)
			if err != nil {
				t.Fatal(err)
			}
			var cText, cTok tokenize.TruncCount
			want, err := enc.Encode(texts, &cText)
			if err != nil {
				t.Fatal(err)
			}
			got, err := enc.EncodeTokenized(tokens, &cTok)
			if err != nil {
				t.Fatal(err)
			}
			enc.Close()
			if len(got) != len(texts)*32 || !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Fatalf("%v dynamic=%v: vectors from tokens differ from vectors from texts", cfg.Encoder, dynamic)
			}
			if cTok != cText || strings.HasPrefix(cText.String(), "0 of") {
				t.Fatalf("%v dynamic=%v: truncation %v, want %v", cfg.Encoder, dynamic, cTok, cText)
			}
		}
	}
}

// TestEncoderRowsDoNotChangeVectors: an Encoder sizes each graph to the call (graphRows: the
// full batch, else the call's texts rounded up to a power of two), so a lone query runs a 1-row
// graph. A text's vector must not depend on the rows beside it: 70 texts (MiniLM's widths, H
// 384, FFN 1536, random weights) encoded in one call and one text per call, then in calls of 3
// and 13, give the same bits, with fixed and with dynamic padding; and the graphs are the ones
// graphRows names. Bits on the assembly kernels (checked with RAGTRAIN_KERNEL=avx2 and =avx512
// on an AMD EPYC Zen 5); within 1e-6 on gonum's Sgemm (-tags noasm, CPUs without AVX2), which
// blocks its sums by the matrix's rows.
func TestEncoderRowsDoNotChangeVectors(t *testing.T) {
	tok := bertTokenizer(t)
	same := func(a, b []float32) bool {
		if strings.HasPrefix(model.BLAS(), "Go AVX") {
			return slices.Equal(a, b)
		}
		return len(a) == len(b) && maxAbsDiff(a, b) <= 1e-6
	}
	n := make([]int, 70)
	for i := range n {
		n[i] = 1 + i*11%60
	}
	texts := wordTexts(t, tok, n, 5)
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 384, Layers: 1,
		Heads: 12, FFN: 1536, MaxPosition: 128}
	m, err := model.NewBiEncoder(cfg, true, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 0.05, 3)
	const maxLen = 64
	for _, dynamic := range []bool{false, true} {
		t.Run(fmt.Sprintf("dynamic=%v", dynamic), func(t *testing.T) {
			enc, err := NewEncoder(m.Query, tok, maxLen, dynamic)
			if err != nil {
				t.Fatal(err)
			}
			defer enc.Close()
			all, err := enc.Encode(texts, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, per := range []int{1, 3, 13} {
				for lo := 0; lo < len(texts); lo += per {
					hi := min(lo+per, len(texts))
					v, err := enc.Encode(texts[lo:hi], nil)
					if err != nil {
						t.Fatal(err)
					}
					if !same(v, all[lo*384:hi*384]) {
						t.Fatalf("texts %d..%d encoded %d at a time differ from one call of %d by %.3g",
							lo, hi-1, per, len(texts), maxAbsDiff(v, all[lo*384:hi*384]))
					}
				}
			}
			// The graphs: a lone text ran a 1-row graph, a call of 3 a 4-row one (padded to 32
			// or 64 with dynamic padding, always to 64 without).
			want := []graphKey{{1, maxLen}, {4, maxLen}, {16, maxLen}, {64, maxLen}}
			if dynamic {
				want = []graphKey{{1, 32}, {4, 32}, {1, maxLen}, {4, maxLen}}
			}
			for _, k := range want {
				if enc.runners[k] == nil {
					t.Errorf("no %d x %d graph after calls of 1, 3, 13 and 70 texts", k.Rows, k.L)
				}
			}
			if got := enc.graphRows(1, 32); got != 1 {
				t.Errorf("graphRows(1, 32) = %d, want 1", got)
			}
			for _, tc := range []struct{ n, L, want int }{{3, 32, 4}, {13, 32, 16}, {64, 32, 64}, {500, 32, 64}, {0, 32, 1}} {
				if got := enc.graphRows(tc.n, tc.L); got != tc.want {
					t.Errorf("graphRows(%d, %d) = %d, want %d", tc.n, tc.L, got, tc.want)
				}
			}
		})
	}
	// With dynamic padding the full batch at L 256 is dynamicRows(256) = 16 rows.
	enc, _ := NewEncoder(m.Query, tok, 256, true)
	if got := enc.graphRows(40, 256); got != 16 {
		t.Errorf("dynamic graphRows(40, 256) = %d, want 16", got)
	}
}

// BenchmarkEncoderLoneQuery encodes one query of 12 tokens at a time with a tower of
// all-MiniLM-L6-v2's shape (6 layers, H 384, 12 heads, FFN 1536; random weights), padded to
// 32 tokens as a retriever's query encoder pads it: the encoding half of a dense query's
// latency (metrics.json "<dense system>/query_milliseconds").
func BenchmarkEncoderLoneQuery(b *testing.B) {
	tok := bertTokenizer(b)
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 384, Layers: 6,
		Heads: 12, FFN: 1536, MaxPosition: 512}
	m, err := model.NewBiEncoder(cfg, true, 3)
	if err != nil {
		b.Fatal(err)
	}
	texts := wordTexts(b, tok, []int{10}, 9)
	enc, err := NewEncoder(m.Query, tok, 64, true)
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	if _, err := enc.Encode(texts, nil); err != nil { // the graph is built outside the timing
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := enc.Encode(texts, nil); err != nil {
			b.Fatal(err)
		}
	}
}
