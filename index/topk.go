package index

import "slices"

// Dot is the inner product Flat scores with: float32 products accumulated in four running sums
// (lanes i mod 4), the tail added to the first, and the lanes added as (s0+s1)+(s2+s3). A search
// that scores with Dot and collects with TopK returns exactly Flat's hits, score for score.
// It panics when len(b) < len(a).
func Dot(a, b []float32) float32 { return dot(a, b) }

// TopK collects the k best of the hits offered to it under the order of SortHits (Score
// descending, ties by DocID ascending), in O(log k) per offer. Since that order is total for
// distinct DocIDs, the result does not depend on the order of the offers: searching the rows of
// a Flat in pieces (shards, blocks, goroutines), offering each piece's hits to one TopK, or the
// hits of each piece's own TopK, gives Flat's hits. A TopK is not safe for concurrent use.
type TopK struct {
	k    int
	heap []Hit // root is the worst kept hit
}

// NewTopK returns a collector of the k best hits; with k < 1 it keeps none.
func NewTopK(k int) *TopK { return &TopK{k: k} }

// Offer considers h for the k best.
func (t *TopK) Offer(h Hit) {
	if t.k < 1 {
		return
	}
	if len(t.heap) < t.k {
		t.heap = append(t.heap, h)
		t.up(len(t.heap) - 1)
		return
	}
	if compareHits(h, t.heap[0]) < 0 {
		t.heap[0] = h
		t.down(0)
	}
}

// Worst returns the worst kept hit and true when k hits are kept (a hit that does not rank
// before it cannot enter), and false while fewer than k are kept.
func (t *TopK) Worst() (Hit, bool) {
	if t.k < 1 || len(t.heap) < t.k {
		return Hit{}, false
	}
	return t.heap[0], true
}

// Len returns the number of kept hits, at most k.
func (t *TopK) Len() int { return len(t.heap) }

// Hits returns the kept hits sorted best first, as a new slice.
func (t *TopK) Hits() []Hit {
	out := slices.Clone(t.heap)
	SortHits(out)
	return out
}

func (t *TopK) worse(i, j int) bool { return compareHits(t.heap[i], t.heap[j]) > 0 }

func (t *TopK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.worse(i, p) {
			return
		}
		t.heap[i], t.heap[p] = t.heap[p], t.heap[i]
		i = p
	}
}

func (t *TopK) down(i int) {
	n := len(t.heap)
	for {
		w := i
		if l := 2*i + 1; l < n && t.worse(l, w) {
			w = l
		}
		if r := 2*i + 2; r < n && t.worse(r, w) {
			w = r
		}
		if w == i {
			return
		}
		t.heap[i], t.heap[w] = t.heap[w], t.heap[i]
		i = w
	}
}
