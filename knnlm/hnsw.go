package knnlm

import (
	"fmt"
	"math"
	"strconv"

	"github.com/ragtrain/ragtrain/index/ann"
)

// HNSW searches a store approximately with index/ann's HNSW graph, which ranks by inner
// product: each key k is indexed as [k, -|k|²/2, sqrt(C - |k|² - |k|⁴/4)] with C the largest
// |k|² + |k|⁴/4 of the store (every indexed vector has norm √C, so the graph links keys by
// angle, a metric) and each query q is searched as [q, 1, 0], so its inner product
// q·k - |k|²/2 = (|q|² - |q - k|²)/2 ranks keys as the L2 distance does; the distance is
// recovered as |q|² - 2·score (clamped at 0). The recall is approximate: measure it against
// Store.Search (TestHNSWRecall; the kind reports it). The store must not change afterwards.
type HNSW struct {
	s  *Store
	g  *ann.HNSW
	ef int
}

// NewHNSW indexes the store's keys as stored (float16 keys at their rounded values).
func NewHNSW(s *Store, p ann.Params) (*HNSW, error) {
	if s.Len() == 0 {
		return nil, fmt.Errorf("knnlm: hnsw: empty store")
	}
	D := s.Dim + 2
	var c float64
	for _, n := range s.norms {
		c = math.Max(c, float64(n)+float64(n)*float64(n)/4)
	}
	ids := make([]string, s.Len())
	vecs := make([]float32, s.Len()*D)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
		v := vecs[i*D : (i+1)*D]
		s.Key(i, v[:s.Dim])
		n := float64(s.norms[i])
		v[s.Dim] = float32(-n / 2)
		v[s.Dim+1] = float32(math.Sqrt(math.Max(c-n-n*n/4, 0)))
	}
	g, err := ann.NewHNSW(ids, vecs, D, p)
	if err != nil {
		return nil, fmt.Errorf("knnlm: hnsw: %w", err)
	}
	return &HNSW{s: s, g: g, ef: g.Params().EfSearch}, nil
}

// Search implements Searcher: per query the k best found with max(efSearch, k) candidates,
// nearest first, ties by row.
func (h *HNSW) Search(qs []float32, k int) [][]Neighbor {
	D := h.s.Dim
	if len(qs)%D != 0 {
		panic(fmt.Sprintf("knnlm: hnsw search: %d query values, not a multiple of %d", len(qs), D))
	}
	B := len(qs) / D
	aug := make([]float32, B*(D+2))
	qn := make([]float32, B)
	for b := 0; b < B; b++ {
		q := qs[b*D : (b+1)*D]
		copy(aug[b*(D+2):], q)
		aug[b*(D+2)+D] = 1
		for _, x := range q {
			qn[b] += x * x
		}
	}
	out := make([][]Neighbor, B)
	for b, hits := range h.g.SearchBatchEf(aug, k, h.ef) {
		t := topK{k: k}
		for _, hit := range hits {
			row, err := strconv.Atoi(hit.DocID)
			if err != nil {
				panic(fmt.Sprintf("knnlm: hnsw: id %q", hit.DocID))
			}
			t.offer(max(qn[b]-2*float32(hit.Score), 0), row)
		}
		out[b] = t.sorted(h.s.Values)
	}
	return out
}

// Len is the store's rows.
func (h *HNSW) Len() int { return h.s.Len() }

// Bytes is the store's bytes plus the graph's (its copy of the augmented keys and its links).
func (h *HNSW) Bytes() int64 { return h.s.Bytes() + h.g.Bytes() }
