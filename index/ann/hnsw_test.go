package ann

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/index"
)

// clustered returns n normalised dim-wide rows around 100 Gaussian centres (noise sigma per
// coordinate against unit-variance centres), and their ids "p<i>".
func clustered(n, dim int, sigma float64, seed uint64) ([]string, []float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	centres := make([]float64, 100*dim)
	for i := range centres {
		centres[i] = r.NormFloat64()
	}
	ids := make([]string, n)
	v := make([]float32, n*dim)
	for i := range n {
		ids[i] = "p" + strconv.Itoa(i)
		c := r.IntN(100)
		for j := range dim {
			v[i*dim+j] = float32(centres[c*dim+j] + sigma*r.NormFloat64())
		}
	}
	index.NormalizeRows(v, dim)
	return ids, v
}

// recall is the mean over queries of |got ∩ want| / |want|.
func recall(got, want [][]index.Hit) float64 {
	s := 0.0
	for q := range want {
		w := map[string]bool{}
		for _, h := range want[q] {
			w[h.DocID] = true
		}
		n := 0
		for _, h := range got[q] {
			if w[h.DocID] {
				n++
			}
		}
		s += float64(n) / float64(len(want[q]))
	}
	return s / float64(len(want))
}

func build(t *testing.T, ids []string, v []float32, dim int, p Params) *HNSW {
	t.Helper()
	h, err := NewHNSW(ids, v, dim, p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRecallAgainstFlat measures recall@10 and recall@100 of HNSW (M 16, efConstruction 100)
// against exact search on 5,000 × 64 clustered vectors with 200 held-out queries, and checks
// that recall grows with efSearch. Measured: recall@10 0.5620 at ef 10, 0.9295 at ef 64;
// recall@100 0.9830 at ef 200.
func TestRecallAgainstFlat(t *testing.T) {
	const dim = 64
	ids, v := clustered(5200, dim, 2, 3)
	qs := slices.Clone(v[5000*dim:])
	ids, v = ids[:5000], v[:5000*dim]
	flat, err := index.NewFlat(ids, v, dim)
	if err != nil {
		t.Fatal(err)
	}
	h := build(t, ids, v, dim, Params{M: 16, EfConstruction: 100, Seed: 7})
	exact10, exact100 := flat.SearchBatch(qs, 10), flat.SearchBatch(qs, 100)
	r10lo := recall(h.SearchBatchEf(qs, 10, 10), exact10)
	r10 := recall(h.SearchBatchEf(qs, 10, 64), exact10)
	r100 := recall(h.SearchBatchEf(qs, 100, 200), exact100)
	t.Logf("recall@10 %.4f at ef 10, %.4f at ef 64; recall@100 %.4f at ef 200", r10lo, r10, r100)
	if r10 < 0.90 || r100 < 0.96 || r10lo > r10-0.2 {
		t.Errorf("recall@10 %.4f at ef 10, %.4f at ef 64; recall@100 %.4f at ef 200", r10lo, r10, r100)
	}
}

// TestExactWhenEfCoversAll: with ef >= N the layer-0 search explores the whole connected graph,
// so the hits equal index.Flat's, scores to the bit and order included.
func TestExactWhenEfCoversAll(t *testing.T) {
	const dim = 16
	ids, v := clustered(400, dim, 0.5, 5)
	flat, _ := index.NewFlat(ids, v, dim)
	h := build(t, ids, v, dim, Params{M: 4, EfConstruction: 20, Seed: 1})
	for q := range 20 {
		qv := v[q*dim : (q+1)*dim]
		for _, k := range []int{1, 10, 400, 1000} {
			got, want := h.SearchEf(qv, k, 400), flat.Search(qv, k)
			if !slices.Equal(got, want) {
				t.Fatalf("query %d k %d: HNSW %v, Flat %v", q, k, got[:min(3, len(got))], want[:min(3, len(want))])
			}
		}
	}
	if h.Search(v[:dim], 0) != nil {
		t.Error("k = 0 returned hits")
	}
}

// TestDeterministic: the same seed and rows give the same graph whatever the number of build
// workers; another seed gives another graph. Search and SearchBatch agree.
func TestDeterministic(t *testing.T) {
	const dim = 32
	ids, v := clustered(3000, dim, 1, 9)
	a := build(t, ids, v, dim, Params{M: 8, EfConstruction: 50, Seed: 11, Workers: 1})
	b := build(t, ids, v, dim, Params{M: 8, EfConstruction: 50, Seed: 11, Workers: 3})
	c := build(t, ids, v, dim, Params{M: 8, EfConstruction: 50, Seed: 12, Workers: 3})
	same := func(x, y *HNSW) bool {
		return slices.Equal(x.links0, y.links0) && slices.Equal(x.n0, y.n0) && slices.Equal(x.level, y.level) &&
			slices.EqualFunc(x.upper, y.upper, slices.Equal) && x.entry == y.entry && x.top == y.top
	}
	if !same(a, b) {
		t.Error("1 and 3 workers built different graphs from the same seed")
	}
	if same(a, c) {
		t.Error("seeds 11 and 12 built the same graph")
	}
	qs := v[:50*dim]
	batch := b.SearchBatch(qs, 10)
	for q := range 50 {
		if got := a.Search(qs[q*dim:(q+1)*dim], 10); !slices.Equal(got, batch[q]) {
			t.Fatalf("query %d: Search %v, SearchBatch of the other build %v", q, got, batch[q])
		}
	}
}

func TestNewHNSWErrors(t *testing.T) {
	ids, v := clustered(10, 4, 1, 1)
	nan := slices.Clone(v)
	nan[6] = float32(0) / float32(len(ids)-10)
	for _, c := range []struct {
		name string
		ids  []string
		v    []float32
		dim  int
		p    Params
		want string
	}{
		{"empty", nil, nil, 4, Params{}, "no passages"},
		{"dim", ids, v, 0, Params{}, "dim 0"},
		{"length", ids, v[:39], 4, Params{}, "39 values for 10 ids × dim 4"},
		{"dup", append(slices.Clone(ids[:9]), "p0"), v, 4, Params{}, `id "p0" at rows 0 and 9`},
		{"empty id", append(slices.Clone(ids[:9]), ""), v, 4, Params{}, "empty id at row 9"},
		{"nan", ids, nan, 4, Params{}, "row 1 (id \"p1\") column 2 is NaN"},
		{"M", ids, v, 4, Params{M: 1}, "M = 1"},
		{"ef", ids, v, 4, Params{EfSearch: -1}, "efSearch = -1"},
	} {
		if _, err := NewHNSW(c.ids, c.v, c.dim, c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	h := build(t, ids, v, 4, Params{})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "query has 3 values, dim is 4") {
			t.Errorf("Search with a 3-value query: panic %v", r)
		}
	}()
	h.Search(v[:3], 1)
}

func TestNewThreshold(t *testing.T) {
	ids, v := clustered(100, 8, 1, 2)
	for _, c := range []struct {
		threshold int
		hnsw      bool
	}{{0, false}, {-1, false}, {101, false}, {100, true}, {1, true}} {
		s, err := New(ids, v, 8, c.threshold, Params{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.(*HNSW); ok != c.hnsw || s.Len() != 100 || s.Dim() != 8 {
			t.Errorf("threshold %d: %T (len %d, dim %d), want HNSW %v", c.threshold, s, s.Len(), s.Dim(), c.hnsw)
		}
	}
	// A failure is a nil Searcher (not a nil *index.Flat inside one), exact or HNSW.
	for _, threshold := range []int{0, 1} {
		if s, err := New(ids, v[:7], 8, threshold, Params{}); err == nil || s != nil {
			t.Errorf("threshold %d, 7 values: %v, %v; want a nil Searcher and an error", threshold, s, err)
		}
	}
}

// Score gives Flat's score of an indexed passage to the bit, and false for an unknown id.
func TestScoreMatchesFlat(t *testing.T) {
	ids, v := clustered(300, 16, 0.5, 4)
	h := build(t, ids, v, 16, Params{})
	f, err := index.NewFlat(ids, v, 16)
	if err != nil {
		t.Fatal(err)
	}
	q := v[5*16 : 6*16]
	for _, id := range []string{"p0", "p5", "p299"} {
		got, ok := h.Score(q, id)
		want, _ := f.Score(q, id)
		if !ok || got != want {
			t.Errorf("Score(q, %q) = %v, %v; Flat's %v", id, got, ok, want)
		}
	}
	if s, _ := h.Score(q, "p5"); s < 0.999 || s > 1.001 {
		t.Errorf("a normalised row's score with itself is %v, want 1", s)
	}
	if p := h.Params(); p.M != 16 || p.EfConstruction != 200 || p.EfSearch != 64 || p.Seed != 0 || p.Workers < 1 {
		t.Errorf("Params() = %+v, want the defaults for zero fields (seed 0 as given)", p)
	}
	if _, ok := h.Score(q, "p300"); ok {
		t.Error("Score of an id not indexed reported true")
	}
}
