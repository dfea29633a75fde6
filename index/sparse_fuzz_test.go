package index

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzSparseIndex decodes arbitrary postings.bin bytes with arbitrary manifest counts, as
// OpenSparse does once the files' sizes and sha256 agree with the manifest (decodeSparse): no
// count, offset or varint may panic it or allocate beyond the file, and an index it accepts
// serves every term: a query of all terms visits exactly the manifest's postings, and returns
// distinct passages of the index, best first.
func FuzzSparseIndex(f *testing.F) {
	dir := f.TempDir()
	for i, c := range []struct {
		docs  [][]Term
		vocab int
	}{
		{[][]Term{{{ID: 1, Weight: 1}}, {{ID: 2, Weight: 2}, {ID: 1, Weight: 0.5}}}, 4},
		{[][]Term{{}, {{ID: 0, Weight: 3}}, {{ID: 0, Weight: 1}, {ID: 5, Weight: 2}}}, 6},
	} {
		ids := make([]string, len(c.docs))
		for j := range ids {
			ids[j] = fmt.Sprint("p", j)
		}
		x, err := NewSparse(ids, c.docs, c.vocab)
		if err != nil {
			f.Fatal(err)
		}
		d := filepath.Join(dir, fmt.Sprint(i))
		if err := x.Write(d, nil); err != nil {
			f.Fatal(err)
		}
		pb, err := os.ReadFile(filepath.Join(d, sparsePost))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pb, c.vocab, x.Postings(), len(ids))
	}
	f.Fuzz(func(t *testing.T, pb []byte, vocab, postings, passages int) {
		if passages < 0 || passages > 64 {
			return // the ids come from ids.txt, whose count the manifest is checked against first
		}
		ids := make([]string, passages)
		for i := range ids {
			ids[i] = fmt.Sprint("p", i)
		}
		x, err := decodeSparse("fuzz", ids, pb, SparseManifest{Format: sparseFormat, Passages: passages, Vocab: vocab, Postings: postings})
		if err != nil {
			return
		}
		q := make([]Term, vocab)
		df := 0
		for t := range q {
			q[t] = Term{ID: int32(t), Weight: 1}
			df += x.DocFreq(t)
		}
		hits, visited := x.Search(q, passages+1)
		if visited != postings || df != postings || x.Postings() != postings {
			t.Fatalf("visited %d postings, document frequencies sum to %d, the manifest says %d", visited, df, postings)
		}
		seen := map[string]bool{}
		for i, h := range hits {
			if seen[h.DocID] || !slices.Contains(ids, h.DocID) {
				t.Fatalf("hit %d: passage %q twice or not in the index", i, h.DocID)
			}
			seen[h.DocID] = true
			if i > 0 && !(h.Score <= hits[i-1].Score) && !math.IsNaN(h.Score) && !math.IsNaN(hits[i-1].Score) {
				t.Fatalf("hits not best first: %v then %v", hits[i-1].Score, h.Score)
			}
		}
	})
}
