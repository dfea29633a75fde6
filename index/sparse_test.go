package index

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPrune(t *testing.T) {
	got := Prune([]float32{0, 0.5, -1, 0.9, 0.5, 0.2}, 3)
	want := []Term{{1, 0.5}, {3, 0.9}, {4, 0.5}}
	if len(got) != len(want) {
		t.Fatalf("Prune = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Prune = %v, want %v", got, want)
		}
	}
	if got := Prune([]float32{0.3, 0.3, 0.3}, 2); got[0].ID != 0 || got[1].ID != 1 || len(got) != 2 {
		t.Errorf("ties: %v, want ids 0, 1", got)
	}
	if got := Prune([]float32{0, 2, 0, 1}, 0); len(got) != 2 {
		t.Errorf("k = 0 keeps every non-zero: %v", got)
	}
	// PruneTerms(Prune(v, k'), k) = Prune(v, k) for k <= k', ties included (weights drawn from
	// 8 values), and the input is left as it was.
	r := rand.New(rand.NewPCG(4, 4))
	v := make([]float32, 500)
	for i := range v {
		if r.Float64() < 0.5 {
			v[i] = float32(r.IntN(8)) / 4
		}
	}
	wide := Prune(v, 200)
	before := slices.Clone(wide)
	for _, k := range []int{1, 7, 64, 199, 200, 300, 0} {
		want := Prune(v, min(k, 200))
		if k == 0 {
			want = wide
		}
		if got := PruneTerms(wide, k); !slices.Equal(got, want) {
			t.Errorf("PruneTerms(Prune(v, 200), %d): %d terms, differs from Prune(v, %d)", k, len(got), k)
		}
	}
	if !slices.Equal(wide, before) {
		t.Errorf("PruneTerms changed its input")
	}
}

// TestSparseMatchesBruteForce: the inverted index ranks as the dense dot product of the pruned
// vectors does, before and after a write and read back; the visited postings are the query
// terms' document frequencies.
func TestSparseMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const V, D = 300, 150
	ids := make([]string, D)
	docs := make([][]Term, D)
	dense := make([][]float32, D)
	for d := range docs {
		ids[d] = "d" + string(rune('a'+d%26)) + strings.Repeat("x", d/26)
		dense[d] = make([]float32, V)
		for v := range dense[d] {
			if r.Float64() < 0.1 {
				dense[d][v] = float32(r.Float64())
			}
		}
		docs[d] = Prune(dense[d], 20)
	}
	x, err := NewSparse(ids, docs, V)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "idx")
	if err := x.Write(dir, map[string]any{"top_k": 20}); err != nil {
		t.Fatal(err)
	}
	y, m, err := OpenSparse(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Passages != D || m.Vocab != V || m.Postings != x.Postings() || y.Postings() != x.Postings() {
		t.Fatalf("manifest %+v, postings %d / %d", m, x.Postings(), y.Postings())
	}
	for qi := 0; qi < 10; qi++ {
		qd := make([]float32, V)
		for v := range qd {
			if r.Float64() < 0.05 {
				qd[v] = float32(r.Float64())
			}
		}
		q := Prune(qd, 0)
		top := NewTopK(10)
		want := 0
		for _, t := range q {
			want += x.DocFreq(int(t.ID))
		}
		for d, ts := range docs {
			s := 0.0
			for _, t := range ts {
				s += float64(qd[t.ID]) * float64(t.Weight)
			}
			if s > 0 {
				top.Offer(Hit{DocID: ids[d], Score: s})
			}
		}
		for _, idx := range []*Sparse{x, y} {
			hits, visited := idx.Search(q, 10)
			if visited != want {
				t.Errorf("visited %d postings, the query terms' df sum to %d", visited, want)
			}
			exp := top.Hits()
			if len(hits) != len(exp) {
				t.Fatalf("query %d: %d hits, want %d", qi, len(hits), len(exp))
			}
			for i := range exp {
				if hits[i].DocID != exp[i].DocID || math.Abs(hits[i].Score-exp[i].Score) > 1e-9 {
					t.Fatalf("query %d hit %d: %v, want %v", qi, i, hits[i], exp[i])
				}
			}
		}
	}
	// a flipped byte is refused naming the file; an existing target is refused
	b, _ := os.ReadFile(filepath.Join(dir, sparsePost))
	b[len(b)-1] ^= 1
	os.WriteFile(filepath.Join(dir, sparsePost), b, 0o644)
	if _, _, err := OpenSparse(dir); err == nil || !strings.Contains(err.Error(), sparsePost) {
		t.Errorf("corrupt postings: err = %v", err)
	}
	if err := x.Write(dir, nil); err == nil {
		t.Error("Write over an existing directory succeeded")
	}
	if _, err := NewSparse([]string{"a"}, [][]Term{{{ID: V, Weight: 1}}}, V); err == nil {
		t.Error("a term outside the vocabulary was indexed")
	}
}

// TestOpenSparseRefusesForgedCounts: a manifest whose counts were edited (the data files and
// their sha256 untouched) is refused with an error naming the manifest and the field, never a
// panic: a vocabulary of 2^60 terms once overflowed the size check and reached make.
func TestOpenSparseRefusesForgedCounts(t *testing.T) {
	x, err := NewSparse([]string{"a", "b"}, [][]Term{{{ID: 1, Weight: 1}}, {{ID: 2, Weight: 2}}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "idx")
	if err := x.Write(dir, nil); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, sparseManifest)
	orig, _ := os.ReadFile(mp)
	for _, c := range []struct{ field, value string }{
		{"vocab", "1152921504606846975"}, {"vocab", "9223372036854775807"}, {"vocab", "-2"},
		{"postings", "-1"}, {"postings", "4611686018427387904"}, {"passages", "-1"},
	} {
		var m map[string]any
		json.Unmarshal(orig, &m)
		m[c.field] = json.RawMessage(c.value)
		b, _ := json.Marshal(m)
		os.WriteFile(mp, b, 0o644)
		_, _, err := OpenSparse(dir)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s = %s: err = %v, want one naming %q", c.field, c.value, err, c.field)
		}
	}
}

// TestOpenSparseNamesAnotherFormat: a directory holding another index (a PLAID manifest, whose
// "bytes" is a number) is refused by its format, not by a JSON type error on "bytes".
func TestOpenSparseNamesAnotherFormat(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, sparseManifest), []byte(`{"format": "ragtrain-plaid/1", "bytes": 83587, "file": "plaid.bin"}`), 0o644)
	_, _, err := OpenSparse(dir)
	if err == nil || !strings.Contains(err.Error(), `format "ragtrain-plaid/1"`) {
		t.Errorf("err = %v, want one naming the format", err)
	}
}
