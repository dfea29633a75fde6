package knnlm

import (
	"fmt"
	"math"
	"slices"

	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/model"
)

// Key precisions of a Store.
const (
	Float32 = "float32" // 4 bytes a value
	Float16 = "float16" // 2 bytes a value, IEEE 754 half precision (round to nearest even); distances use the rounded key
)

// MaxStoreRows bounds a store's rows (values are int32 and rows are addressed as int).
const MaxStoreRows = math.MaxInt32

// Store is a kNN-LM datastore: N keys of Dim values each (row-major) and their values (the next
// token id). Keys are kept as float32 or float16 (Precision); the squared norm of every stored
// (rounded) key is kept beside it. Not safe for concurrent Add; Search may run concurrently
// with other searches.
type Store struct {
	Dim       int
	Precision string
	keys32    []float32
	keys16    []uint16
	norms     []float32 // |k_i|², of the stored key
	Values    []int32
}

// NewStore is an empty store of keys of dim values at precision (Float32 or Float16).
func NewStore(dim int, precision string) (*Store, error) {
	if dim < 1 {
		return nil, fmt.Errorf("knnlm: store: key dimension %d, want >= 1", dim)
	}
	if precision != Float32 && precision != Float16 {
		return nil, fmt.Errorf("knnlm: store: precision %q, want %q or %q", precision, Float32, Float16)
	}
	return &Store{Dim: dim, Precision: precision}, nil
}

// Add appends the pair (key, value). key must have Dim finite values and value be >= 0.
func (s *Store) Add(key []float32, value int) error {
	if len(key) != s.Dim {
		return fmt.Errorf("knnlm: store: key of %d values, want %d", len(key), s.Dim)
	}
	if value < 0 || value > math.MaxInt32 {
		return fmt.Errorf("knnlm: store: value %d out of range", value)
	}
	if len(s.Values) >= MaxStoreRows {
		return fmt.Errorf("knnlm: store: more than %d rows", MaxStoreRows)
	}
	var n float32
	for _, x := range key {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("knnlm: store: key %d has a non-finite value", len(s.Values))
		}
		if s.Precision == Float16 {
			h := shard.Half(x)
			s.keys16 = append(s.keys16, h)
			x = shard.HalfValue(h)
		} else {
			s.keys32 = append(s.keys32, x)
		}
		n += x * x
	}
	s.norms = append(s.norms, n)
	s.Values = append(s.Values, int32(value))
	return nil
}

// Len is N, the number of pairs.
func (s *Store) Len() int { return len(s.Values) }

// Bytes is the memory of the keys, their norms and the values: N·(Dim·(4 or 2) + 4 + 4).
func (s *Store) Bytes() int64 {
	per := int64(4)
	if s.Precision == Float16 {
		per = 2
	}
	return int64(s.Len()) * (int64(s.Dim)*per + 8)
}

// Key writes key i as stored (rounded to float16 at that precision) into dst [Dim].
func (s *Store) Key(i int, dst []float32) {
	if s.Precision == Float16 {
		for j, h := range s.keys16[i*s.Dim : (i+1)*s.Dim] {
			dst[j] = shard.HalfValue(h)
		}
		return
	}
	copy(dst, s.keys32[i*s.Dim:(i+1)*s.Dim])
}

// Neighbor is one key found for a query: its row in the store, its value and its squared L2
// distance to the query.
type Neighbor struct {
	Row   int
	Value int
	Dist  float32
}

// Searcher finds the k nearest keys of every query.
type Searcher interface {
	// Search returns, for each of the B = len(qs)/Dim queries (row-major B x Dim), its
	// min(k, N) nearest keys, nearest first.
	Search(qs []float32, k int) [][]Neighbor
	Len() int
	Bytes() int64
}

// searchBlock is the keys compared per matrix product (a 4096 x Dim block and B x 4096 scores).
const searchBlock = 4096

// Search is the exact search: every key's squared distance |q|² - 2 q·k + |k|² (clamped at 0),
// by blocked matrix products (model.Sgemm); ties by row ascending. It panics when len(qs) is
// not a multiple of Dim.
func (s *Store) Search(qs []float32, k int) [][]Neighbor {
	D := s.Dim
	if len(qs)%D != 0 {
		panic(fmt.Sprintf("knnlm: search: %d query values, not a multiple of %d", len(qs), D))
	}
	B := len(qs) / D
	out := make([][]Neighbor, B)
	if k < 1 || s.Len() == 0 || B == 0 {
		return out
	}
	qn := make([]float32, B)
	for b := range qn {
		for _, x := range qs[b*D : (b+1)*D] {
			qn[b] += x * x
		}
	}
	tops := make([]topK, B)
	for b := range tops {
		tops[b].k = k
	}
	blk := make([]float32, min(searchBlock, s.Len())*D)
	scores := make([]float32, B*min(searchBlock, s.Len()))
	for start := 0; start < s.Len(); start += searchBlock {
		n := min(searchBlock, s.Len()-start)
		var keys []float32
		if s.Precision == Float16 {
			for j, h := range s.keys16[start*D : (start+n)*D] {
				blk[j] = shard.HalfValue(h)
			}
			keys = blk[:n*D]
		} else {
			keys = s.keys32[start*D : (start+n)*D]
		}
		model.Sgemm(false, true, B, n, D, 1, qs, D, keys, D, 0, scores, n)
		for b := 0; b < B; b++ {
			t := &tops[b]
			norms := s.norms[start : start+n]
			for j, dot := range scores[b*n : (b+1)*n] {
				d := max(qn[b]-2*dot+norms[j], 0)
				// rows are offered in ascending order, so once the heap is full a key at the
				// heap's largest distance or farther is not nearer (a tie loses on its row)
				if len(t.h) == t.k && d >= t.h[0].Dist {
					continue
				}
				t.offer(d, start+j)
			}
		}
	}
	for b := range out {
		out[b] = tops[b].sorted(s.Values)
	}
	return out
}

// topK keeps the k smallest (distance, row) pairs in a max-heap.
type topK struct {
	k int
	h []Neighbor
}

func worse(a, b Neighbor) bool { return a.Dist > b.Dist || (a.Dist == b.Dist && a.Row > b.Row) }

// compareNeighbors orders nearer first, ties by row ascending.
func compareNeighbors(a, b Neighbor) int {
	switch {
	case worse(b, a):
		return -1
	case worse(a, b):
		return 1
	}
	return 0
}

func (t *topK) offer(d float32, row int) {
	c := Neighbor{Row: row, Dist: d}
	if len(t.h) < t.k {
		t.h = append(t.h, c)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !worse(t.h[0], c) {
		return
	}
	t.h[0] = c
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && worse(t.h[l], t.h[m]) {
			m = l
		}
		if r < len(t.h) && worse(t.h[r], t.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

func (t *topK) sorted(values []int32) []Neighbor {
	out := slices.Clone(t.h)
	slices.SortFunc(out, compareNeighbors)
	for i := range out {
		out[i].Value = int(values[out[i].Row])
	}
	return out
}

// Concat searches several searchers as one datastore: rows of searcher j are offset by the
// lengths of the searchers before it, and the k nearest of all are kept (ties by row).
type Concat []Searcher

// Search implements Searcher.
func (c Concat) Search(qs []float32, k int) [][]Neighbor {
	var out [][]Neighbor
	off := 0
	for _, s := range c {
		res := s.Search(qs, k)
		if out == nil {
			out = make([][]Neighbor, len(res))
		}
		for b, nb := range res {
			for _, n := range nb {
				n.Row += off
				out[b] = append(out[b], n)
			}
		}
		off += s.Len()
	}
	for b := range out {
		slices.SortFunc(out[b], compareNeighbors)
		out[b] = out[b][:min(k, len(out[b]))]
	}
	return out
}

// Len is the searchers' rows together.
func (c Concat) Len() int {
	n := 0
	for _, s := range c {
		n += s.Len()
	}
	return n
}

// Bytes is the searchers' bytes together.
func (c Concat) Bytes() int64 {
	var n int64
	for _, s := range c {
		n += s.Bytes()
	}
	return n
}
