package bench

import (
	"bytes"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data/synth"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
)

// TestBowProjection: the embedding is deterministic whatever the thread count, unit-norm, zero
// for a text without words, and ranks a query's relevant passage far above chance: over 100
// queries on 2,000 passages (64 dims, 4,096 buckets), the best relevant passage's exact rank
// is measured 4 at the median and 197 at the 90th percentile, where chance would be about 500
// and 900.
func TestBowProjection(t *testing.T) {
	col, err := synth.New(synth.Config{Passages: 2000, Queries: 100, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	const dim = 64
	ids, vecs, qs := embedCollection(col, dim, 1<<12, 5, 1)
	_, vecs3, qs3 := embedCollection(col, dim, 1<<12, 5, 3)
	if !slices.Equal(vecs, vecs3) || !slices.Equal(qs, qs3) {
		t.Fatal("1 and 3 threads embed differently")
	}
	for i := range 2000 {
		var s float64
		for _, x := range vecs[i*dim : (i+1)*dim] {
			s += float64(x) * float64(x)
		}
		if math.Abs(s-1) > 1e-5 {
			t.Fatalf("passage %d: squared norm %v", i, s)
		}
	}
	p := NewBowProjection(dim, 16, 1, make([]int32, 16), 10)
	z := make([]float32, dim)
	p.Embed("  ", z)
	if slices.ContainsFunc(z, func(x float32) bool { return x != 0 }) {
		t.Error("a text without words has a non-zero vector")
	}
	flat, _ := index.NewFlat(ids, vecs, dim)
	var ranks []int
	for q := range 100 {
		hits := flat.Search(qs[q*dim:(q+1)*dim], 2000)
		best := 2000
		for _, d := range col.Query(q).Relevant {
			best = min(best, slices.IndexFunc(hits, func(h index.Hit) bool { return h.DocID == synth.PassageID(d) }))
		}
		ranks = append(ranks, best)
	}
	slices.Sort(ranks)
	t.Logf("best relevant rank: median %d, 90th percentile %d", ranks[50], ranks[90])
	if ranks[50] > 10 || ranks[90] > 300 {
		t.Errorf("best relevant rank: median %d (want <= 10), 90th percentile %d (want <= 300)", ranks[50], ranks[90])
	}
}

// TestRunANN runs the ann workload on 3,000 passages and checks what it reports: exact top 100
// for every query, recall in [0, 1] growing with efSearch, and measured recall@10 at ef 512.
func TestRunANN(t *testing.T) {
	o := DefaultANNOptions()
	o.Passages, o.Queries, o.Dim, o.EfSearch, o.Threads = 3000, 50, 64, []int{8, 512}, 2
	o.Params = ann.Params{M: 8, EfConstruction: 64, Seed: 3}
	var out bytes.Buffer
	o.Out, o.Log = &out, io.Discard
	r, err := RunANN(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sets) != 2 {
		t.Fatalf("%d query sets, want 2", len(r.Sets))
	}
	for _, qs := range r.Sets {
		for q, e := range qs.exact {
			if len(e) != 100 {
				t.Fatalf("%s %d: %d exact hits", qs.Name, q, len(e))
			}
		}
		lo, hi := qs.Runs[0], qs.Runs[1]
		t.Logf("%s: recall@10 %.4f / %.4f, recall@100 %.4f / %.4f at ef 8 / 512", qs.Name, lo.Recall10, hi.Recall10, lo.Recall100, hi.Recall100)
		if lo.Recall10 > hi.Recall10 || lo.Recall100 > hi.Recall100 || hi.Recall10 < 0.97 || hi.Recall100 > 1 || qs.ExactQPS <= 0 {
			t.Errorf("%s: recall@10 %.4f / %.4f, recall@100 %.4f / %.4f at ef 8 / 512", qs.Name, lo.Recall10, hi.Recall10, lo.Recall100, hi.Recall100)
		}
	}
	if !strings.Contains(out.String(), "| 512 |") || !strings.Contains(out.String(), "## held-out passages") || r.BuildSeconds <= 0 {
		t.Errorf("table or timings missing:\n%s", out.String())
	}
	if _, err := RunANN(ANNOptions{Passages: 5}); err == nil || !strings.Contains(err.Error(), "passages 5") {
		t.Errorf("5 passages: error %v", err)
	}
}
