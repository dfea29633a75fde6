package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopKOrderFree checks that TopK keeps the first k hits of the sorted list, ties by DocID,
// whatever order they are offered in.
func TestTopKOrderFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hits := make([]Hit, 500)
	for i := range hits {
		hits[i] = Hit{DocID: fmt.Sprintf("d%03d", i), Score: float64(rng.IntN(20))} // many ties
	}
	sorted := slices.Clone(hits)
	SortHits(sorted)
	for _, k := range []int{0, 1, 7, 499, 500, 600} {
		for trial := range 5 {
			rng.Shuffle(len(hits), func(i, j int) { hits[i], hits[j] = hits[j], hits[i] })
			top := NewTopK(k)
			for _, h := range hits {
				top.Offer(h)
			}
			want := sorted[:min(k, len(sorted))]
			if got := top.Hits(); !slices.Equal(got, want) {
				t.Fatalf("k=%d trial %d: got %v..., want %v...", k, trial, got[:min(3, len(got))], want[:min(3, len(want))])
			}
			if w, full := top.Worst(); full != (k >= 1 && k <= len(hits)) || full && w != want[k-1] {
				t.Fatalf("k=%d: Worst = %v, %v", k, w, full)
			}
		}
	}
}

// TestDotIsFlats checks that Dot scores as Flat does, bit for bit, and differs from DotInOrder
// on a case where the lanes round differently.
func TestDotIsFlats(t *testing.T) {
	a := []float32{1e8, 1, -1e8, 1, 1}
	b := []float32{1, 1, 1, 1, 1}
	f, err := NewFlat([]string{"x"}, b, 5)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := f.Score(a, "x")
	if float32(s) != Dot(a, b) || Dot(a, b) != 0 || DotInOrder(a, b) != 2 {
		t.Fatalf("Flat %v, Dot %v, DotInOrder %v; want 0, 0, 2", s, Dot(a, b), DotInOrder(a, b))
	}
}
