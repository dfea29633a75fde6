package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// smallIntVectors draws n×dim values in {-2..2}: inner products are exact in float32 and
// ties are frequent. Rows 1 and 2 are copies of row 0, so they always tie.
func smallIntVectors(n, dim int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0))
	v := make([]float32, n*dim)
	for i := range v {
		v[i] = float32(r.IntN(5) - 2)
	}
	copy(v[dim:2*dim], v[:dim])
	copy(v[2*dim:3*dim], v[:dim])
	return v
}

// bruteForce scores every passage in float64 and sorts by score desc, id asc.
func bruteForce(ids []string, vecs, q []float32, dim, k int) []Hit {
	hits := make([]Hit, len(ids))
	for d := range ids {
		var s float64
		for i := range dim {
			s += float64(q[i]) * float64(vecs[d*dim+i])
		}
		hits[d] = Hit{DocID: ids[d], Score: s}
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		if a.DocID < b.DocID {
			return -1
		}
		return 1
	})
	return hits[:min(k, len(hits))]
}

func TestFlatMatchesBruteForce(t *testing.T) {
	const n, dim, nq = 600, 13, 37 // dim not a multiple of 4, n not of the block size
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("doc%d", (i*7919)%n) // ids not in row order
	}
	vecs := smallIntVectors(n, dim, 1)
	f, err := NewFlat(ids, vecs, dim)
	if err != nil {
		t.Fatal(err)
	}
	qs := smallIntVectors(nq, dim, 2)
	copy(qs[:dim], vecs[:dim]) // query 0 maximises on the three copies of row 0
	for _, k := range []int{1, 10, 257, n, n + 5} {
		batch := f.SearchBatch(qs, k)
		if len(batch) != nq {
			t.Fatalf("SearchBatch returned %d lists, want %d", len(batch), nq)
		}
		ties := 0
		for qi := range nq {
			q := qs[qi*dim : (qi+1)*dim]
			want := bruteForce(ids, vecs, q, dim, k)
			got := f.Search(q, k)
			if !slices.Equal(got, want) {
				t.Fatalf("k=%d query %d: Search differs from brute force:\n got %v\nwant %v", k, qi, got[:min(5, len(got))], want[:min(5, len(want))])
			}
			if !slices.Equal(batch[qi], got) {
				t.Fatalf("k=%d query %d: SearchBatch differs from Search", k, qi)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Score == got[i-1].Score {
					ties++
				}
			}
		}
		if ties == 0 && k > 1 {
			t.Errorf("k=%d: no ties exercised", k)
		}
	}
	top := f.Search(qs[:dim], 3)
	if top[0].Score != top[2].Score {
		t.Errorf("the copies of row 0 should tie at the top: %v", top)
	}
}

func TestFlatSearchBatchDeterministic(t *testing.T) {
	const n, dim, nq = 300, 32, 50
	r := rand.New(rand.NewPCG(7, 7))
	vecs := make([]float32, n*dim)
	for i := range vecs {
		vecs[i] = float32(r.NormFloat64())
	}
	qs := make([]float32, nq*dim)
	for i := range qs {
		qs[i] = float32(r.NormFloat64())
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	f, err := NewFlat(ids, vecs, dim)
	if err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(1)
	one := f.SearchBatch(qs, 20)
	runtime.GOMAXPROCS(4)
	four := f.SearchBatch(qs, 20)
	runtime.GOMAXPROCS(prev)
	for qi := range nq {
		if !slices.Equal(one[qi], four[qi]) {
			t.Fatalf("query %d: results depend on GOMAXPROCS", qi)
		}
		// float32 accumulation stays within 1e-4 of the float64 inner product here.
		want := bruteForce(ids, vecs, qs[qi*dim:(qi+1)*dim], dim, 1)[0]
		if one[qi][0].DocID != want.DocID || math.Abs(one[qi][0].Score-want.Score) > 1e-4 {
			t.Errorf("query %d: top %v, float64 brute force %v", qi, one[qi][0], want)
		}
	}
	if got := f.SearchBatch(nil, 5); len(got) != 0 {
		t.Errorf("empty batch gave %d lists", len(got))
	}
	if got := f.Search(qs[:dim], 0); got != nil {
		t.Errorf("k = 0 gave %v", got)
	}
}

func TestNewFlatErrors(t *testing.T) {
	tests := []struct {
		name string
		ids  []string
		vecs []float32
		dim  int
	}{
		{"dim zero", []string{"a"}, nil, 0},
		{"wrong length", []string{"a", "b"}, []float32{1, 2, 3}, 2},
		{"repeated id", []string{"a", "a"}, []float32{1, 2}, 1},
		{"empty id", []string{""}, []float32{1}, 1},
		{"NaN", []string{"a", "b"}, []float32{1, float32(math.NaN())}, 1},
		{"Inf", []string{"a"}, []float32{float32(math.Inf(-1))}, 1},
	}
	for _, tt := range tests {
		if _, err := NewFlat(tt.ids, tt.vecs, tt.dim); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	f, err := NewFlat([]string{"a"}, []float32{1, 2}, 2)
	if err != nil || f.Len() != 1 || f.Dim() != 2 {
		t.Fatalf("NewFlat: %v", err)
	}
}

func TestCompareHitsNaN(t *testing.T) {
	hits := []Hit{{"b", math.NaN()}, {"c", 1}, {"a", math.NaN()}, {"d", 2}, {"a2", 1}}
	SortHits(hits)
	want := []string{"d", "a2", "c", "a", "b"}
	for i, h := range hits {
		if h.DocID != want[i] {
			t.Fatalf("order %v, want ids %v", hits, want)
		}
	}
}

func TestNormalizeRows(t *testing.T) {
	v := []float32{3, 4, 0, 0, 1, 0}
	NormalizeRows(v, 2)
	want := []float32{0.6, 0.8, 0, 0, 1, 0}
	for i := range v {
		if math.Abs(float64(v[i]-want[i])) > 1e-7 {
			t.Fatalf("NormalizeRows = %v, want %v", v, want)
		}
	}
}

// TestDotInOrderRoundsLeftToRight pins the two sums apart: on [1e8, 1, -1e8, 1] · 1 the
// left-to-right float32 sum keeps the last 1 (1e8+1 rounds to 1e8, minus 1e8 is 0, plus 1),
// while the four-lane dot of Flat adds (1e8 + 1) + (-1e8 + 1), which rounds to 0.
func TestDotInOrderRoundsLeftToRight(t *testing.T) {
	a := []float32{1e8, 1, -1e8, 1}
	b := []float32{1, 1, 1, 1, 7} // longer b: only its first len(a) values count
	if got := DotInOrder(a, b); got != 1 {
		t.Fatalf("DotInOrder = %v, want 1", got)
	}
	if got := dot(a, b); got != 0 {
		t.Fatalf("dot = %v, want 0 (four running sums)", got)
	}
	if got := DotInOrder([]float32{0.5, -2, 3}, []float32{4, 0.25, 2}); got != 7.5 {
		t.Fatalf("DotInOrder = %v, want 7.5", got)
	}
}
