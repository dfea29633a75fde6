package index

// The in-memory BM25 as it was before the postings were compressed (commit 5f00069), kept as
// the reference that TestBM25MatchesReference compares every ranking with.

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data"
)

type refPosting struct {
	doc, tf int32
}

type refBM25 struct {
	ids      []string
	params   BM25Params
	analyzer *Analyzer
	terms    map[string]int32 // term -> row of postings
	postings [][]refPosting   // docs ascending
	docLen   []int32          // terms per passage after analysis
	idRank   []int32          // idRank[d] = position of ids[d] in ascending id order
	byRank   []int32          // byRank[r] = passage whose id comes r-th in ascending order
	avgdl    float64          // exact mean of docLen

	// Lucene mode: lenNorm[d] = k1·(1 - b + b·decodedLength(d)/avgdl) in float32.
	lenNorm32 []float32
	// Exact mode: lenNorm[d] = k1·(1 - b + b·dl(d)/avgdl) in float64.
	lenNorm64 []float64
}

func newRefBM25(ids, texts []string, p BM25Params) *refBM25 {
	if len(ids) != len(texts) {
		panic(fmt.Sprintf("index: NewBM25: %d ids but %d texts", len(ids), len(texts)))
	}
	if p.K1 < 0 || math.IsNaN(p.K1) || !(p.B >= 0 && p.B <= 1) {
		panic(fmt.Sprintf("index: NewBM25: k1 = %v must be >= 0 and b = %v in [0, 1]", p.K1, p.B))
	}
	checkIDs("NewBM25", ids)
	a := p.Analyzer
	if a == nil {
		a = EnglishAnalyzer()
	}
	x := &refBM25{
		ids:      slices.Clone(ids),
		params:   p,
		analyzer: a,
		terms:    make(map[string]int32),
		docLen:   make([]int32, len(ids)),
	}
	var total int64
	tf := make(map[string]int32)
	stems := make(map[string]string)
	for d, text := range texts {
		clear(tf)
		terms := a.analyze(text, stems)
		for _, t := range terms {
			tf[t]++
		}
		// Insert in first-occurrence order so the term table does not depend on map order.
		for _, t := range terms {
			n, ok := tf[t]
			if !ok {
				continue
			}
			delete(tf, t)
			row, seen := x.terms[t]
			if !seen {
				row = int32(len(x.postings))
				x.terms[t] = row
				x.postings = append(x.postings, nil)
			}
			x.postings[row] = append(x.postings[row], refPosting{doc: int32(d), tf: n})
		}
		x.docLen[d] = int32(len(terms))
		total += int64(len(terms))
	}
	if len(ids) > 0 {
		x.avgdl = float64(total) / float64(len(ids))
	}
	x.computeNorms(total)
	order := make([]int32, len(ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(ids[a], ids[b]) })
	x.byRank = order
	x.idRank = make([]int32, len(ids))
	for r, d := range order {
		x.idRank[d] = int32(r)
	}
	return x
}

func (x *refBM25) computeNorms(total int64) {
	n := len(x.ids)
	k1, b := x.params.K1, x.params.B
	if x.params.ExactLengths {
		x.lenNorm64 = make([]float64, n)
		for d, dl := range x.docLen {
			x.lenNorm64[d] = k1 * (1 - b + b*float64(dl)/x.avgdl)
		}
		return
	}
	// BM25Similarity.avgFieldLength: (float) (sumTotalTermFreq / (double) maxDoc), 1 if empty.
	avgdl := float32(1)
	if total > 0 {
		avgdl = float32(float64(total) / float64(n))
	}
	k1f, bf := float32(k1), float32(b)
	var cache [256]float32 // BM25Similarity's per-query cache, indexed by norm byte
	for i := range cache {
		bDL := float32(bf * luceneDecodeLength(byte(i)))
		cache[i] = k1f * float32(float32(1-bf)+float32(bDL/avgdl))
	}
	x.lenNorm32 = make([]float32, n)
	for d, dl := range x.docLen {
		x.lenNorm32[d] = cache[luceneEncodeLength(int(dl))]
	}
}

func (x *refBM25) SearchTerms(terms []string, k int) []Hit {
	if k < 1 {
		return nil
	}
	var touched []int32
	seen := make([]bool, len(x.ids))
	if x.params.ExactLengths {
		acc := make([]float64, len(x.ids))
		for _, t := range terms {
			row, ok := x.terms[t]
			if !ok {
				continue
			}
			w := IDF(len(x.ids), len(x.postings[row])) * (x.params.K1 + 1)
			for _, p := range x.postings[row] {
				if !seen[p.doc] {
					seen[p.doc] = true
					touched = append(touched, p.doc)
				}
				tf := float64(p.tf)
				acc[p.doc] += w * tf / (tf + x.lenNorm64[p.doc])
			}
		}
		return x.top(touched, func(d int32) float64 { return acc[d] }, k)
	}
	acc := make([]float64, len(x.ids))
	for _, t := range terms {
		row, ok := x.terms[t]
		if !ok {
			continue
		}
		w := x.weight32(len(x.postings[row]))
		for _, p := range x.postings[row] {
			if !seen[p.doc] {
				seen[p.doc] = true
				touched = append(touched, p.doc)
			}
			acc[p.doc] += float64(score32(w, p.tf, x.lenNorm32[p.doc]))
		}
	}
	// Positive float32 scores order like their bits: one uint64 key per passage, (inverted score
	// bits, id rank), sorts score descending then id ascending without a comparison function.
	keys := make([]uint64, 0, len(touched))
	for _, d := range touched {
		if s := float32(acc[d]); s > 0 {
			keys = append(keys, uint64(^math.Float32bits(s))<<32|uint64(x.idRank[d]))
		}
	}
	slices.Sort(keys)
	keys = keys[:min(k, len(keys))]
	hits := make([]Hit, len(keys))
	for i, key := range keys {
		hits[i] = Hit{
			DocID: x.ids[x.byRank[uint32(key)]],
			Score: float64(math.Float32frombits(^uint32(key >> 32))),
		}
	}
	return hits
}

func (x *refBM25) weight32(df int) float32 {
	idf := float32(IDF(len(x.ids), df))
	return idf * float32(float32(x.params.K1)+1)
}

func (x *refBM25) top(touched []int32, score func(int32) float64, k int) []Hit {
	type cand struct {
		score float64
		rank  int32 // position of the id in ascending order
		doc   int32
	}
	cands := make([]cand, 0, len(touched))
	for _, d := range touched {
		if s := score(d); s > 0 {
			cands = append(cands, cand{s, x.idRank[d], d})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(a.rank - b.rank)
	})
	cands = cands[:min(k, len(cands))]
	hits := make([]Hit, len(cands))
	for i, c := range cands {
		hits[i] = Hit{DocID: x.ids[c.doc], Score: c.score}
	}
	return hits
}

func (x *refBM25) Score(query string, doc int) float64 {
	if doc < 0 || doc >= len(x.ids) {
		panic(fmt.Sprintf("index: BM25.Score: passage %d out of range [0, %d)", doc, len(x.ids)))
	}
	var s float64
	for _, t := range x.analyzer.Analyze(query) {
		row, ok := x.terms[t]
		if !ok {
			continue
		}
		ps := x.postings[row]
		i, found := slices.BinarySearchFunc(ps, int32(doc), func(p refPosting, d int32) int {
			return int(p.doc - d)
		})
		if !found {
			continue
		}
		p := ps[i]
		if x.params.ExactLengths {
			w := IDF(len(x.ids), len(ps)) * (x.params.K1 + 1)
			tf := float64(p.tf)
			s += w * tf / (tf + x.lenNorm64[doc])
		} else {
			s += float64(score32(x.weight32(len(ps)), p.tf, x.lenNorm32[doc]))
		}
	}
	if x.params.ExactLengths {
		return s
	}
	return float64(float32(s))
}

// TestBM25MatchesReference checks that the compressed index ranks every query of Cranfield,
// CISI and SciFact exactly as the reference did: the same hits, in the same order, with the
// same score bits, to depth 1000 and for all matches, in Lucene and exact mode, indexing
// title + " " + text and text alone; and that DocFreq, DocLen and Score agree.
func TestBM25MatchesReference(t *testing.T) {
	for _, name := range []string{"cranfield", "cisi", "scifact"} {
		ds, err := data.Load(filepath.Join("..", "datasets", name))
		if err != nil {
			t.Fatal(err)
		}
		c := ds.Corpus
		for _, withTitle := range []bool{true, false} {
			texts := make([]string, c.Len())
			for i := range texts {
				texts[i] = c.Passage(i, withTitle)
			}
			for _, exact := range []bool{false, true} {
				p := DefaultBM25Params()
				p.ExactLengths = exact
				ref, x := newRefBM25(c.IDs, texts, p), NewBM25(c.IDs, texts, p)
				// The same index through the builder, passage by passage (NewBM25 uses it too;
				// checked once per collection).
				var xb *BM25
				if withTitle && !exact {
					b := NewBM25Builder(p)
					for i, id := range c.IDs {
						b.Add(id, texts[i])
					}
					xb = b.Build()
				}
				compared := 0
				for qi, q := range ds.Queries.Texts {
					terms := x.Analyzer().Analyze(q)
					want := ref.SearchTerms(terms, c.Len()) // every match
					if got := x.SearchTerms(terms, c.Len()); !sameHitBits(got, want) {
						t.Fatalf("%s title=%v exact=%v query %s: ranking differs from the reference",
							name, withTitle, exact, ds.Queries.IDs[qi])
					}
					if got := xb; got != nil && !sameHitBits(got.Search(q, 1000), want[:min(1000, len(want))]) {
						t.Fatalf("%s title=%v exact=%v query %s: the builder's top 1000 differ",
							name, withTitle, exact, ds.Queries.IDs[qi])
					}
					compared += len(want)
					if qi%50 == 0 { // Score on a few passages, matched or not
						for _, d := range []int{0, qi % c.Len(), c.Len() - 1} {
							if a, b := x.Score(q, d), ref.Score(q, d); math.Float64bits(a) != math.Float64bits(b) {
								t.Fatalf("%s query %d passage %d: Score %v, reference %v", name, qi, d, a, b)
							}
						}
					}
				}
				for term, row := range ref.terms {
					if x.DocFreq(term) != len(ref.postings[row]) {
						t.Fatalf("%s: DocFreq(%q) = %d, reference %d", name, term, x.DocFreq(term), len(ref.postings[row]))
					}
				}
				if len(x.terms) != len(ref.terms) || x.AvgDocLen() != ref.avgdl || !slices.Equal(x.docLen, ref.docLen) {
					t.Fatalf("%s: collection statistics differ", name)
				}
				if compared < 10000 {
					t.Fatalf("%s: only %d hits compared", name, compared)
				}
			}
		}
	}
}

func sameHitBits(a, b []Hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DocID != b[i].DocID || math.Float64bits(a[i].Score) != math.Float64bits(b[i].Score) {
			return false
		}
	}
	return true
}

// BenchmarkBM25SearchReference is BenchmarkBM25Search on the reference (uncompressed) index.
func BenchmarkBM25SearchReference(b *testing.B) {
	ids, texts, queries := readCranfield(b)
	x := newRefBM25(ids, texts, DefaultBM25Params())
	b.ResetTimer()
	for b.Loop() {
		for _, q := range queries {
			x.SearchTerms(x.analyzer.Analyze(q), 1000)
		}
	}
}
