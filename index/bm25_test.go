package index

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// workedCollection has N = 100 passages with avgdl = 20 (2000 terms): "outage" occurs in 5
// passages and "report" in 50. Passage A (id "a", 10 terms) holds outage once and report
// twice; passage B (id "b", 40 terms) holds outage twice. Filler terms are "zzz".
func workedCollection() (ids, texts []string) {
	passage := func(length int, words ...string) string {
		for len(words) < length {
			words = append(words, "zzz")
		}
		return strings.Join(words, " ")
	}
	ids = append(ids, "a", "b")
	texts = append(texts, passage(10, "outage", "report", "report"), passage(40, "outage", "outage"))
	// 97 passages of 20 terms and one of 10: 10 + 40 + 1940 + 10 = 2000 terms.
	for i := range 98 {
		var words []string
		if i < 3 {
			words = append(words, "outage")
		}
		if i < 49 {
			words = append(words, "report")
		}
		length := 20
		if i == 97 {
			length = 10
		}
		ids = append(ids, fmt.Sprintf("p%02d", i))
		texts = append(texts, passage(length, words...))
	}
	return ids, texts
}

func TestBM25WorkedValues(t *testing.T) {
	ids, texts := workedCollection()
	p := DefaultBM25Params()
	p.ExactLengths = true
	x := NewBM25(ids, texts, p)
	if x.Len() != 100 || x.AvgDocLen() != 20 || x.DocFreq("outag") != 5 || x.DocFreq("report") != 50 {
		t.Fatalf("collection stats N=%d avgdl=%v df(outag)=%d df(report)=%d, want 100 20 5 50",
			x.Len(), x.AvgDocLen(), x.DocFreq("outag"), x.DocFreq("report"))
	}
	hits := x.Search("outage report", 100)
	got := map[string]float64{}
	for _, h := range hits {
		got[h.DocID] = h.Score
	}
	for _, tt := range []struct {
		id   string
		want float64
	}{{"a", 4.7677}, {"b", 3.1233}} { // b: 2.910371 · 4.4/4.1 = 3.123327
		if math.Abs(got[tt.id]-tt.want) > 1e-4 {
			t.Errorf("score(%s) = %.6f, want %.4f", tt.id, got[tt.id], tt.want)
		}
	}
	if hits[0].DocID != "a" {
		t.Errorf("top hit %v, want passage a", hits[0])
	}
	// 50 passages hold report; of the 5 holding outage, only B does not: 51 match.
	if len(hits) != 51 {
		t.Errorf("%d hits, want 51 (passages holding outage or report)", len(hits))
	}
}

// TestLuceneNorms checks the one-byte length norm against values derived by hand from
// SmallFloat.floatToByte315 (3 significant bits, the leading one implicit, rounding down; byte
// = 4·(exponent + 127 - 96) + the two stored bits): 1/sqrt(10) = 1.265·2^-2 keeps
// 1.25·2^-2 = 0.3125, byte 4·29 + 1 = 117, decoded as 1/0.3125² = 10.24.
func TestLuceneNorms(t *testing.T) {
	tests := []struct {
		length int
		b      byte
		want   float64
	}{
		{1, 124, 1}, {4, 120, 4}, {10, 117, 10.24}, {20, 115, 1 / (0.21875 * 0.21875)},
		{40, 113, 40.96}, {100, 110, 1 / (0.09375 * 0.09375)}, {1000, 104, 1024},
	}
	for _, tt := range tests {
		b := luceneEncodeLength(tt.length)
		got := float64(luceneDecodeLength(b))
		if b != tt.b || math.Abs(got-tt.want) > 1e-4*tt.want {
			t.Errorf("length %d: byte %d decoded %v, want byte %d decoded %v", tt.length, b, got, tt.b, tt.want)
		}
	}
	if floatToByte315(0) != 0 || floatToByte315(float32(math.Inf(1))) != 255 || byte315ToFloat(0) != 0 {
		t.Errorf("floatToByte315 edge cases wrong")
	}
}

func TestBM25LuceneMode(t *testing.T) {
	ids, texts := workedCollection()
	x := NewBM25(ids, texts, DefaultBM25Params())
	// Expected values with the decoded lengths 10.24 (A) and 40.96 (B), avgdl 20.
	k1, b, avgdl := 1.2, 0.75, 20.0
	idfOut, idfRep := math.Log(1+95.5/5.5), math.Log(2)
	term := func(idf, tf, dl float64) float64 {
		return idf * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/avgdl))
	}
	wantA := term(idfOut, 1, 10.24) + term(idfRep, 2, 10.24) // 4.7410 (4.7677 exact)
	wantB := term(idfOut, 2, 40.96)                          // 3.0908 (3.1233 exact)
	for _, tt := range []struct {
		doc  int
		want float64
	}{{0, wantA}, {1, wantB}} {
		if got := x.Score("outage report", tt.doc); math.Abs(got-tt.want) > 2e-6*tt.want {
			t.Errorf("Lucene-mode score(%s) = %.7f, want %.7f", ids[tt.doc], got, tt.want)
		}
	}
	if math.Abs(wantA-4.7410) > 1e-4 || math.Abs(wantB-3.0908) > 1e-4 {
		t.Errorf("hand values drifted: %.4f %.4f", wantA, wantB)
	}
}

func TestBM25SearchAgreesWithScore(t *testing.T) {
	ids, texts := workedCollection()
	for _, exact := range []bool{false, true} {
		p := DefaultBM25Params()
		p.ExactLengths = exact
		x := NewBM25(ids, texts, p)
		hits := x.Search("report outage zzz unknownword", 1000)
		if len(hits) != 100 {
			t.Fatalf("exact=%v: %d hits, want all 100 (every passage holds zzz)", exact, len(hits))
		}
		pos := map[string]int{}
		for i, id := range ids {
			pos[id] = i
		}
		for i, h := range hits {
			if s := x.Score("report outage zzz unknownword", pos[h.DocID]); s != h.Score {
				t.Errorf("exact=%v: Search gives %s %v, Score gives %v", exact, h.DocID, h.Score, s)
			}
			if i > 0 && compareHits(hits[i-1], h) >= 0 {
				t.Errorf("exact=%v: hits %d and %d out of order: %v %v", exact, i-1, i, hits[i-1], h)
			}
		}
	}
}

func TestBM25QueryTerms(t *testing.T) {
	ids := []string{"d3", "d1", "d2", "d0"}
	texts := []string{"wing flutter", "wing flutter", "heat transfer", "wing"}
	p := DefaultBM25Params()
	p.ExactLengths = true
	x := NewBM25(ids, texts, p)

	// Equal texts tie; ties go by DocID ascending; passages without a query term are absent.
	hits := x.Search("flutter", 10)
	if len(hits) != 2 || hits[0].DocID != "d1" || hits[1].DocID != "d3" || hits[0].Score != hits[1].Score {
		t.Errorf("Search(flutter) = %v, want d1 and d3 tied", hits)
	}
	if got := x.Search("flutter", 1); len(got) != 1 || got[0].DocID != "d1" {
		t.Errorf("k = 1: %v, want [d1]", got)
	}
	if got := x.Search("the of nothing", 10); len(got) != 0 {
		t.Errorf("query without indexed terms: %v, want none", got)
	}
	if got := x.Search("flutter", 0); got != nil {
		t.Errorf("k = 0: %v, want none", got)
	}
	// A repeated query term is a second OR clause: it counts twice.
	once, twice := x.Score("flutter", 1), x.Score("flutter flutters", 1)
	if math.Abs(twice-2*once) > 1e-12 || once <= 0 {
		t.Errorf("repeated term: %v, want 2 × %v", twice, once)
	}
	if got := x.SearchTerms([]string{"flutter", "flutter"}, 1); got[0].Score != twice {
		t.Errorf("SearchTerms repeated: %v, want %v", got[0].Score, twice)
	}
	if x.DocLen(3) != 1 || x.DocID(2) != "d2" {
		t.Errorf("DocLen(3) = %d, DocID(2) = %q", x.DocLen(3), x.DocID(2))
	}
}

func TestNewBM25Panics(t *testing.T) {
	for name, f := range map[string]func(){
		"length mismatch": func() { NewBM25([]string{"a"}, nil, DefaultBM25Params()) },
		"repeated id":     func() { NewBM25([]string{"a", "a"}, []string{"x", "y"}, DefaultBM25Params()) },
		"empty id":        func() { NewBM25([]string{""}, []string{"x"}, DefaultBM25Params()) },
		"b > 1":           func() { NewBM25(nil, nil, BM25Params{K1: 1.2, B: 1.5}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// readCranfield reads the repository's copy of Cranfield (passage = title + " " + text, as
// the Lucene reference run indexed it) and its 225 queries.
func readCranfield(tb testing.TB) (ids, texts, queries []string) {
	tb.Helper()
	read := func(path string, each func(line []byte) error) {
		f, err := os.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for n := 1; sc.Scan(); n++ {
			if err := each(sc.Bytes()); err != nil {
				tb.Fatalf("%s:%d: %v", path, n, err)
			}
		}
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	read("../datasets/cranfield/corpus.jsonl", func(line []byte) error {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		err := json.Unmarshal(line, &d)
		ids, texts = append(ids, d.ID), append(texts, d.Title+" "+d.Text)
		return err
	})
	read("../datasets/cranfield/queries.jsonl", func(line []byte) error {
		var q struct {
			Text string `json:"text"`
		}
		err := json.Unmarshal(line, &q)
		queries = append(queries, q.Text)
		return err
	})
	if len(ids) != 1400 || len(queries) != 225 {
		tb.Fatalf("read %d passages and %d queries, want 1400 and 225", len(ids), len(queries))
	}
	return ids, texts, queries
}

func BenchmarkBM25Index(b *testing.B) {
	ids, texts, _ := readCranfield(b)
	b.ResetTimer()
	for b.Loop() {
		NewBM25(ids, texts, DefaultBM25Params())
	}
}

// BenchmarkBM25Search runs all 225 Cranfield queries at depth 1000 per iteration.
func BenchmarkBM25Search(b *testing.B) {
	ids, texts, queries := readCranfield(b)
	x := NewBM25(ids, texts, DefaultBM25Params())
	b.ResetTimer()
	for b.Loop() {
		for _, q := range queries {
			x.Search(q, 1000)
		}
	}
}

// TestBM25ConcurrentSearches runs Cranfield's queries from four goroutines at once, in both
// modes: each gets the hits a lone search gets (the pooled accumulators are not shared).
func TestBM25ConcurrentSearches(t *testing.T) {
	ids, texts, queries := readCranfield(t)
	for _, exact := range []bool{false, true} {
		p := DefaultBM25Params()
		p.ExactLengths = exact
		x := NewBM25(ids, texts, p)
		want := make([][]Hit, len(queries))
		for i, q := range queries {
			want[i] = x.Search(q, 100)
		}
		errs := make(chan string, 4)
		for g := range 4 {
			go func() {
				for j := range queries {
					i := (j + g*57) % len(queries)
					if got := x.Search(queries[i], 100); !slices.Equal(got, want[i]) {
						errs <- fmt.Sprintf("exact=%v goroutine %d query %d: hits differ", exact, g, i)
						return
					}
				}
				errs <- ""
			}()
		}
		for range 4 {
			if e := <-errs; e != "" {
				t.Fatal(e)
			}
		}
	}
}
