package eval

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzTRECRun reads arbitrary bytes as a TREC run. A run that loads has, per query, at least
// one hit, doc ids that are unique and free of white space, finite scores; and writing it then
// reading gives the same run (queries, hits in order, scores bit for bit).
func FuzzTRECRun(f *testing.F) {
	for _, name := range []string{"lucene-bm25-english-cranfield.run", "lucene-bm25-english-cisi.run"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		f.Add(bytes.Join(lines[:5], nil))
	}
	f.Add([]byte("1 Q0 d1 1 -0 t\n1 Q0 d2 1 1e308 t\n\n2 Q0 d1 3 0.5 t\n"))
	dir := f.TempDir() // reused: a worker runs one input at a time
	in, out := filepath.Join(dir, "in.run"), filepath.Join(dir, "out.run")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(in, b, 0o644); err != nil {
			t.Fatal(err)
		}
		run, err := ReadTREC(in)
		if err != nil {
			return
		}
		for q, hits := range run {
			if len(hits) == 0 {
				t.Fatalf("query %q has no hits", q)
			}
			seen := map[string]bool{}
			for _, h := range hits {
				if seen[h.DocID] || checkField("doc id", h.DocID) != nil || math.IsNaN(h.Score) || math.IsInf(h.Score, 0) {
					t.Fatalf("query %q: hit %+v (repeated, empty, white space or not finite)", q, h)
				}
				seen[h.DocID] = true
			}
		}
		if err := WriteTREC(out, run, "fuzz"); err != nil {
			t.Fatalf("a loaded run cannot be written: %v", err)
		}
		back, err := ReadTREC(out)
		if err != nil {
			t.Fatalf("a written run does not read back: %v", err)
		}
		if len(back) != len(run) {
			t.Fatalf("write then read: %d queries, want %d", len(back), len(run))
		}
		for q, hits := range run {
			got := back[q]
			if len(got) != len(hits) {
				t.Fatalf("query %q: %d hits, want %d", q, len(got), len(hits))
			}
			for i := range hits {
				if got[i].DocID != hits[i].DocID || math.Float64bits(got[i].Score) != math.Float64bits(hits[i].Score) {
					t.Fatalf("query %q hit %d: %+v, want %+v", q, i, got[i], hits[i])
				}
			}
		}
	})
}
