package index

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Flat is an exact inner-product index over float32 embeddings: every search scores every
// passage, score(q, d) = sum_i q[i]·d[i], accumulated in float32 in a fixed order so Search and
// SearchBatch agree to the bit. Normalise the vectors beforehand for cosine similarity.
// A Flat is read-only after NewFlat and safe for concurrent searches.
type Flat struct {
	ids  []string
	vecs []float32 // N×dim, row-major
	dim  int
	row  map[string]int // id -> row
}

// NewFlat indexes the N = len(ids) passages whose embeddings are the rows of vecs (N×dim,
// row-major). The vectors are copied. It fails when dim < 1, len(vecs) != N·dim, an id is
// empty or repeated, or a value is NaN or infinite.
func NewFlat(ids []string, vecs []float32, dim int) (*Flat, error) {
	seen, err := CheckRows(ids, vecs, dim)
	if err != nil {
		return nil, fmt.Errorf("index: NewFlat: %w", err)
	}
	return &Flat{ids: slices.Clone(ids), vecs: slices.Clone(vecs), dim: dim, row: seen}, nil
}

// Len returns the number of indexed passages.
func (f *Flat) Len() int { return len(f.ids) }

// Dim returns the embedding dimension.
func (f *Flat) Dim() int { return f.dim }

// Rows returns the indexed ids and their N×dim vectors (row-major), in the order NewFlat was
// given them: the index's own slices, to be read, not changed.
func (f *Flat) Rows() ([]string, []float32) { return f.ids, f.vecs }

// Search returns the k passages with the largest inner product with q (length dim), all of
// them when k >= Len, none when k < 1. Ties are broken by DocID ascending. It panics when
// len(q) != dim.
func (f *Flat) Search(q []float32, k int) []Hit {
	if len(q) != f.dim {
		panic(fmt.Sprintf("index: Flat.Search: query has %d values, dim is %d", len(q), f.dim))
	}
	if k < 1 {
		return nil
	}
	t := NewTopK(k)
	for d, id := range f.ids {
		t.Offer(Hit{DocID: id, Score: float64(dot(q, f.vecs[d*f.dim:(d+1)*f.dim]))})
	}
	return t.Hits()
}

// Score returns the inner product of q with the passage id, as Search scores it, and false when
// id is not indexed. It panics when len(q) != dim.
func (f *Flat) Score(q []float32, id string) (float64, bool) {
	if len(q) != f.dim {
		panic(fmt.Sprintf("index: Flat.Score: query has %d values, dim is %d", len(q), f.dim))
	}
	d, ok := f.row[id]
	if !ok {
		return 0, false
	}
	return float64(dot(q, f.vecs[d*f.dim:(d+1)*f.dim])), true
}

// Block sizes of SearchBatch's matrix product: a block of queries is scored against a block of
// passages while both stay in cache.
const (
	queryBlock   = 8
	passageBlock = 256
)

// SearchBatch searches the B = len(qs)/dim queries stored row-major in qs (B×dim) and returns
// their results in order; result b equals Search(qs[b·dim:(b+1)·dim], k). Blocks of queries run
// on at most GOMAXPROCS goroutines. It panics when len(qs) is not a multiple of dim.
func (f *Flat) SearchBatch(qs []float32, k int) [][]Hit {
	if len(qs)%f.dim != 0 {
		panic(fmt.Sprintf("index: Flat.SearchBatch: %d values is not a multiple of dim %d", len(qs), f.dim))
	}
	nq := len(qs) / f.dim
	out := make([][]Hit, nq)
	if k < 1 || nq == 0 {
		return out
	}
	nBlocks := (nq + queryBlock - 1) / queryBlock
	workers := min(runtime.GOMAXPROCS(0), nBlocks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				blk := int(next.Add(1)) - 1
				if blk >= nBlocks {
					return
				}
				lo, hi := blk*queryBlock, min((blk+1)*queryBlock, nq)
				f.searchBlock(qs, lo, hi, k, out)
			}
		})
	}
	wg.Wait()
	return out
}

// searchBlock scores queries lo..hi-1 against all passages, block by block.
func (f *Flat) searchBlock(qs []float32, lo, hi, k int, out [][]Hit) {
	tops := make([]*TopK, hi-lo)
	for i := range tops {
		tops[i] = NewTopK(k)
	}
	n, dim := len(f.ids), f.dim
	for p0 := 0; p0 < n; p0 += passageBlock {
		p1 := min(p0+passageBlock, n)
		for qi := lo; qi < hi; qi++ {
			q := qs[qi*dim : (qi+1)*dim]
			t := tops[qi-lo]
			for d := p0; d < p1; d++ {
				t.Offer(Hit{DocID: f.ids[d], Score: float64(dot(q, f.vecs[d*dim:(d+1)*dim]))})
			}
		}
	}
	for i, t := range tops {
		out[lo+i] = t.Hits()
	}
}

// DotInOrder is the float32 inner product of a and b (len(b) >= len(a)) summed left to right,
// one rounding per term. Joint training (RAG, RePlug, REALM) computes its retrieval logits with
// it; Flat's search uses dot, whose four running sums round differently (both are
// deterministic, but they are not interchangeable without changing those recipes' numbers).
func DotInOrder(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// dot is the float32 inner product with four running sums, added in a fixed order.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// NormalizeRows scales each dim-wide row of v to unit L2 norm in place (all-zero rows stay
// zero), so that inner-product search over the rows ranks by cosine similarity.
func NormalizeRows(v []float32, dim int) {
	for i := 0; i+dim <= len(v); i += dim {
		var s float64
		for _, x := range v[i : i+dim] {
			s += float64(x) * float64(x)
		}
		if s == 0 {
			continue
		}
		inv := float32(1 / math.Sqrt(s))
		for j := i; j < i+dim; j++ {
			v[j] *= inv
		}
	}
}
