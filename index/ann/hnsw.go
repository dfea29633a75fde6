// Package ann holds approximate nearest-neighbour search over float32 embeddings for corpora
// too large for exact search: HNSW, a Hierarchical Navigable Small World graph (Malkov and
// Yashunin, "Efficient and robust approximate nearest neighbor search using Hierarchical
// Navigable Small World graphs", IEEE TPAMI 2020, arXiv:1603.09320), searched by inner product
// (cosine on normalised vectors). New picks exact search (index.Flat) below a passage-count
// threshold and HNSW at or above it.
//
// Why our own HNSW and not github.com/coder/hnsw (v0.6.1, measured in docs/results/ann.md):
// its entry point is the first key of a Go map iteration, so two builds with the same seed and
// insertion order give different graphs and different results (187 of 200 queries differed);
// its search stops at the first expansion that does not improve the best distance, so recall
// does not grow with efSearch (recall@10 0.16 on 5k clustered vectors, 0.05 on 20k, at every
// efSearch from 20 to 200); it has no efConstruction of its own and keeps a Go map per node and
// layer. FAISS through its C API (Debian ships libfaiss-dev 1.7.3) was not measured: it would
// bring cgo and a C++ library into the default build, which is pure Go here (OpenBLAS is an
// opt-in build tag).
//
// Not for: updates after the build (build once from the full corpus), persistence, or metrics
// other than inner product.
package ann

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas/gonum"

	"github.com/ragtrain/ragtrain/index"
)

// Params configure an HNSW graph.
type Params struct {
	// M is the number of neighbours a node keeps on layers >= 1 and the number chosen for a
	// new node on every layer; layer 0 keeps up to 2·M. Default 16.
	M int
	// EfConstruction is the candidate-list size while inserting (default 200); larger builds
	// a better graph, more slowly.
	EfConstruction int
	// EfSearch is the candidate-list size of Search (default 64); Search uses max(EfSearch, k).
	EfSearch int
	// Seed draws the nodes' levels. Same seed, vectors and order: same graph, whatever Workers.
	Seed uint64
	// Workers search the graph for new nodes in parallel (default GOMAXPROCS); links are made
	// in insertion order by one goroutine, so the graph does not depend on Workers.
	Workers int
}

// DefaultParams are M = 16, efConstruction = 200, efSearch = 64, seed 1.
func DefaultParams() Params {
	return Params{M: 16, EfConstruction: 200, EfSearch: 64, Seed: 1}
}

// maxLevel caps the level drawn for a node (the expected top level of 10⁹ nodes with M = 16 is 7).
const maxLevel = 16

// HNSW is an approximate inner-product index over N float32 embeddings of dimension dim. A
// search descends greedily through the upper layers, then keeps the ef best candidates on
// layer 0 (the paper's Algorithms 1, 2 and 5); neighbours are chosen with the paper's
// heuristic (Algorithm 4, without extending candidates or keeping pruned ones). Candidates are
// ranked by inner product computed by gonum's Sdot (SIMD), ties by row; the returned hits carry
// index.Dot scores, as index.Flat computes them, so a passage found by both has the same
// score, and are sorted as index.SortHits sorts. An HNSW is read-only after NewHNSW and safe
// for concurrent searches.
type HNSW struct {
	ids      []string
	rowOf    map[string]int // id -> row
	vecs     []float32      // N×dim, row-major
	dim      int
	m, m0    int // links kept on layers >= 1, on layer 0
	efSearch int
	params   Params // as built, zeros replaced by the defaults
	level    []int8
	links0   []int32   // N×m0: layer-0 neighbours of node i in links0[i·m0 : i·m0+n0[i]]
	n0       []uint8   // layer-0 neighbour counts
	upper    [][]int32 // node i with level L >= 1: L×(m+1) values, per layer a count then m links
	entry    int32
	top      int // level of entry
	scratch  sync.Pool
}

// NewHNSW builds the graph of the N = len(ids) passages whose embeddings are the rows of vecs
// (N×dim, row-major), inserted in row order; vectors should be normalised (cosine). The
// vectors are copied. It fails when N = 0, dim < 1, len(vecs) != N·dim, an id is empty or
// repeated, a value is NaN or infinite, or a parameter is out of range (M in 2..127,
// efConstruction and efSearch >= 1; zero takes the default).
func NewHNSW(ids []string, vecs []float32, dim int, p Params) (*HNSW, error) {
	d := DefaultParams()
	if p.M == 0 {
		p.M = d.M
	}
	if p.EfConstruction == 0 {
		p.EfConstruction = d.EfConstruction
	}
	if p.EfSearch == 0 {
		p.EfSearch = d.EfSearch
	}
	if p.Workers < 1 {
		p.Workers = runtime.GOMAXPROCS(0)
	}
	switch {
	case len(ids) == 0:
		return nil, fmt.Errorf("ann: NewHNSW: no passages to index")
	case p.M < 2 || p.M > 127:
		return nil, fmt.Errorf("ann: NewHNSW: M = %d, want 2..127", p.M)
	case p.EfConstruction < 1 || p.EfSearch < 1:
		return nil, fmt.Errorf("ann: NewHNSW: efConstruction = %d and efSearch = %d must be >= 1", p.EfConstruction, p.EfSearch)
	}
	seen, err := index.CheckRows(ids, vecs, dim)
	if err != nil {
		return nil, fmt.Errorf("ann: NewHNSW: %w", err)
	}
	n := len(ids)
	h := &HNSW{
		ids: slices.Clone(ids), rowOf: seen, vecs: slices.Clone(vecs), dim: dim,
		m: p.M, m0: 2 * p.M, efSearch: p.EfSearch, params: p,
		level: make([]int8, n), links0: make([]int32, n*2*p.M), n0: make([]uint8, n), upper: make([][]int32, n),
	}
	h.scratch.New = func() any { return newScratch(n) }
	r := rand.New(rand.NewPCG(p.Seed, 0x686e7377))
	mL := 1 / math.Log(float64(p.M))
	for i := range h.level {
		l := min(int(-math.Log(1-r.Float64())*mL), maxLevel)
		h.level[i] = int8(l)
		if l > 0 {
			h.upper[i] = make([]int32, l*(p.M+1))
		}
	}
	h.build(p.EfConstruction, p.Workers)
	return h, nil
}

// build inserts nodes 1..N-1 in batches. A batch's nodes are searched for in parallel in the
// graph as it was before the batch; then, in row order, each is linked to the best of those
// candidates and of the batch's earlier nodes, and its neighbours' lists are pruned. Batches
// grow with the graph (1/16 of its size, at most 256 nodes), so early nodes see each other.
func (h *HNSW) build(efC, workers int) {
	n := len(h.ids)
	h.entry, h.top = 0, int(h.level[0])
	cands := make([][][]cand, 256) // per batch slot, per layer: candidates from the frozen graph
	for s := 1; s < n; {
		e := min(n, s+min(256, max(1, s/16)))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(workers, e-s) {
			wg.Go(func() {
				sc := h.scratch.Get().(*scratch)
				defer h.scratch.Put(sc)
				for {
					i := s + int(next.Add(1)) - 1
					if i >= e {
						return
					}
					cands[i-s] = h.searchForInsert(sc, int32(i), efC, cands[i-s])
				}
			})
		}
		wg.Wait()
		for i := s; i < e; i++ {
			h.link(int32(i), s, cands[i-s])
		}
		s = e
	}
}

// searchForInsert returns, for each layer 0..min(level(i), top), the efC nearest nodes to node
// i in the current graph, nearest first.
func (h *HNSW) searchForInsert(sc *scratch, i int32, efC int, out [][]cand) [][]cand {
	q := h.row(i)
	l := int(h.level[i])
	out = out[:0]
	for range min(l, h.top) + 1 {
		out = append(out, nil)
	}
	ep := cand{d: h.dist(q, h.entry), id: h.entry}
	for lc := h.top; lc > l; lc-- {
		ep = h.greedy(q, ep, lc)
	}
	eps := []cand{ep}
	for lc := min(l, h.top); lc >= 0; lc-- {
		w := h.searchLayer(sc, q, eps, efC, lc)
		out[lc] = append(out[lc][:0], w...)
		eps = out[lc]
	}
	return out
}

// link connects node i on each of its layers to M neighbours chosen by the heuristic among its
// candidates from the frozen graph and the nodes s..i-1 of its batch, adds the reverse links
// and prunes the lists that overflow; then i becomes the entry point if its level is the top.
func (h *HNSW) link(i int32, s int, frozen [][]cand) {
	q := h.row(i)
	for lc := int(h.level[i]); lc >= 0; lc-- {
		var c []cand
		if lc < len(frozen) {
			c = slices.Clone(frozen[lc])
		}
		for j := int32(s); j < i; j++ {
			if int(h.level[j]) >= lc {
				c = append(c, cand{d: h.dist(q, j), id: j})
			}
		}
		if len(c) == 0 {
			continue
		}
		slices.SortFunc(c, compareCand)
		nb := h.selectNeighbors(c, h.m)
		h.setLinks(i, lc, nb)
		for _, e := range nb {
			h.addLink(e.id, i, lc)
		}
	}
	if int(h.level[i]) > h.top {
		h.entry, h.top = i, int(h.level[i])
	}
}

// addLink appends i to e's list on layer lc, pruning the list with the heuristic when full.
func (h *HNSW) addLink(e, i int32, lc int) {
	cur := h.links(e, lc)
	limit := h.m
	if lc == 0 {
		limit = h.m0
	}
	if len(cur) < limit {
		h.setLinks(e, lc, append(cur, cand{id: i}))
		return
	}
	v := h.row(e)
	c := make([]cand, 0, len(cur)+1)
	for _, id := range cur {
		c = append(c, cand{d: h.dist(v, id.id), id: id.id})
	}
	c = append(c, cand{d: h.dist(v, i), id: i})
	slices.SortFunc(c, compareCand)
	h.setLinks(e, lc, h.selectNeighbors(c, limit))
}

// selectNeighbors is the paper's heuristic (Algorithm 4): walking the candidates nearest first,
// keep one unless it is nearer to an already kept one than to the base node; at most m.
func (h *HNSW) selectNeighbors(c []cand, m int) []cand {
	if len(c) <= m {
		return c
	}
	kept := make([]cand, 0, m)
	for _, x := range c {
		ok := true
		xv := h.row(x.id)
		for _, y := range kept {
			if h.dist(xv, y.id) < x.d {
				ok = false
				break
			}
		}
		if ok {
			if kept = append(kept, x); len(kept) == m {
				break
			}
		}
	}
	return kept
}

// links returns node e's neighbours on layer lc (as cands without distances), a fresh slice.
func (h *HNSW) links(e int32, lc int) []cand {
	var ids []int32
	if lc == 0 {
		ids = h.links0[int(e)*h.m0 : int(e)*h.m0+int(h.n0[e])]
	} else {
		row := h.upper[e][(lc-1)*(h.m+1):]
		ids = row[1 : 1+row[0]]
	}
	out := make([]cand, len(ids), len(ids)+1)
	for k, id := range ids {
		out[k].id = id
	}
	return out
}

func (h *HNSW) setLinks(e int32, lc int, nb []cand) {
	if lc == 0 {
		dst := h.links0[int(e)*h.m0:]
		for k, x := range nb {
			dst[k] = x.id
		}
		h.n0[e] = uint8(len(nb))
		return
	}
	row := h.upper[e][(lc-1)*(h.m+1):]
	row[0] = int32(len(nb))
	for k, x := range nb {
		row[1+k] = x.id
	}
}

// neighbors returns node e's neighbour rows on layer lc without copying.
func (h *HNSW) neighbors(e int32, lc int) []int32 {
	if lc == 0 {
		return h.links0[int(e)*h.m0 : int(e)*h.m0+int(h.n0[e])]
	}
	row := h.upper[e][(lc-1)*(h.m+1):]
	return row[1 : 1+row[0]]
}

func (h *HNSW) row(i int32) []float32 { return h.vecs[int(i)*h.dim : (int(i)+1)*h.dim] }

// dist is the negated inner product of q with row i (smaller is nearer), by gonum's Sdot with
// the stored row second: Sdot aligns on its second argument, so a row is always summed the
// same way whatever q's address.
func (h *HNSW) dist(q []float32, i int32) float32 {
	return -gonum.Implementation{}.Sdot(h.dim, q, 1, h.row(i), 1)
}

// greedy walks layer lc from ep to a local minimum of dist (efSearch 1).
func (h *HNSW) greedy(q []float32, ep cand, lc int) cand {
	for changed := true; changed; {
		changed = false
		for _, nb := range h.neighbors(ep.id, lc) {
			if c := (cand{d: h.dist(q, nb), id: nb}); compareCand(c, ep) < 0 {
				ep, changed = c, true
			}
		}
	}
	return ep
}

// searchLayer is the paper's Algorithm 2: the ef nearest nodes to q reachable on layer lc from
// the entry points eps, nearest first. The returned slice is the scratch's; copy it to keep it.
func (h *HNSW) searchLayer(sc *scratch, q []float32, eps []cand, ef, lc int) []cand {
	sc.epoch++
	if sc.epoch == 0 { // wrapped: clear the marks
		clear(sc.visited)
		sc.epoch = 1
	}
	sc.cands.s, sc.res.s = sc.cands.s[:0], sc.res.s[:0]
	for _, e := range eps {
		if sc.visited[e.id] == sc.epoch {
			continue
		}
		sc.visited[e.id] = sc.epoch
		sc.cands.push(e, false)
		sc.res.push(e, true)
		if len(sc.res.s) > ef {
			sc.res.pop(true)
		}
	}
	for len(sc.cands.s) > 0 {
		c := sc.cands.pop(false)
		if len(sc.res.s) >= ef && compareCand(c, sc.res.s[0]) > 0 {
			break
		}
		for _, nb := range h.neighbors(c.id, lc) {
			if sc.visited[nb] == sc.epoch {
				continue
			}
			sc.visited[nb] = sc.epoch
			x := cand{d: h.dist(q, nb), id: nb}
			if len(sc.res.s) < ef || compareCand(x, sc.res.s[0]) < 0 {
				sc.cands.push(x, false)
				sc.res.push(x, true)
				if len(sc.res.s) > ef {
					sc.res.pop(true)
				}
			}
		}
	}
	out := sc.out[:0]
	for len(sc.res.s) > 0 {
		out = append(out, sc.res.pop(true))
	}
	slices.Reverse(out)
	sc.out = out
	return out
}

// Len returns the number of indexed passages.
func (h *HNSW) Len() int { return len(h.ids) }

// Params returns the parameters the graph was built with, zero fields replaced by the defaults
// (Workers: the number used).
func (h *HNSW) Params() Params { return h.params }

// Dim returns the embedding dimension.
func (h *HNSW) Dim() int { return h.dim }

// Rows returns the indexed ids and their N×dim vectors (row-major), in insertion order (the
// order NewHNSW was given them): the graph's own slices, to be read, not changed.
func (h *HNSW) Rows() ([]string, []float32) { return h.ids, h.vecs }

// Bytes returns the memory the index holds, in bytes: vectors (4·N·dim), layer-0 links
// (4·N·2M plus a count byte), upper-layer links, levels and ids, without search scratch
// (4·N bytes per concurrent search).
func (h *HNSW) Bytes() int64 {
	b := int64(4*len(h.vecs) + 4*len(h.links0) + len(h.n0) + len(h.level) + 24*len(h.upper))
	for _, u := range h.upper {
		b += int64(4 * len(u))
	}
	for _, id := range h.ids {
		b += int64(16 + len(id))
	}
	return b
}

// Score returns the inner product of q with the passage id, as Search scores it (index.Dot,
// index.Flat.Score's value to the bit), and false when id is not indexed. It panics when
// len(q) != dim.
func (h *HNSW) Score(q []float32, id string) (float64, bool) {
	if len(q) != h.dim {
		panic(fmt.Sprintf("ann: HNSW.Score: query has %d values, dim is %d", len(q), h.dim))
	}
	d, ok := h.rowOf[id]
	if !ok {
		return 0, false
	}
	return float64(index.Dot(q, h.row(int32(d)))), true
}

// Search returns about the k passages with the largest inner product with q (length dim),
// searching with max(efSearch, k) candidates: SearchEf(q, k, efSearch).
func (h *HNSW) Search(q []float32, k int) []index.Hit { return h.SearchEf(q, k, h.efSearch) }

// SearchEf returns the best k (at most Len) passages found with max(ef, k) candidates, sorted by
// index.Dot score descending, ties by DocID ascending; none when k < 1. Larger ef finds more of
// the exact top k, more slowly. It panics when len(q) != dim.
func (h *HNSW) SearchEf(q []float32, k, ef int) []index.Hit {
	if len(q) != h.dim {
		panic(fmt.Sprintf("ann: HNSW.Search: query has %d values, dim is %d", len(q), h.dim))
	}
	if k < 1 {
		return nil
	}
	sc := h.scratch.Get().(*scratch)
	defer h.scratch.Put(sc)
	ep := cand{d: h.dist(q, h.entry), id: h.entry}
	for lc := h.top; lc > 0; lc-- {
		ep = h.greedy(q, ep, lc)
	}
	w := h.searchLayer(sc, q, []cand{ep}, max(ef, k), 0)
	w = w[:min(k, len(w))]
	hits := make([]index.Hit, len(w))
	for j, c := range w {
		hits[j] = index.Hit{DocID: h.ids[c.id], Score: float64(index.Dot(q, h.row(c.id)))}
	}
	index.SortHits(hits)
	return hits
}

// SearchBatch searches the B = len(qs)/dim queries stored row-major in qs (B×dim) on at most
// GOMAXPROCS goroutines; result b equals Search(qs[b·dim:(b+1)·dim], k). It panics when len(qs)
// is not a multiple of dim.
func (h *HNSW) SearchBatch(qs []float32, k int) [][]index.Hit {
	return h.SearchBatchEf(qs, k, h.efSearch)
}

// SearchBatchEf is SearchBatch with ef candidates (SearchEf).
func (h *HNSW) SearchBatchEf(qs []float32, k, ef int) [][]index.Hit {
	if len(qs)%h.dim != 0 {
		panic(fmt.Sprintf("ann: HNSW.SearchBatch: %d values is not a multiple of dim %d", len(qs), h.dim))
	}
	nq := len(qs) / h.dim
	out := make([][]index.Hit, nq)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), nq) {
		wg.Go(func() {
			for {
				b := int(next.Add(1)) - 1
				if b >= nq {
					return
				}
				out[b] = h.SearchEf(qs[b*h.dim:(b+1)*h.dim], k, ef)
			}
		})
	}
	wg.Wait()
	return out
}

// cand is a node and its distance to the query (negated inner product).
type cand struct {
	d  float32
	id int32
}

// compareCand orders by distance, then by row, so that equal distances never depend on order.
func compareCand(a, b cand) int {
	switch {
	case a.d < b.d:
		return -1
	case a.d > b.d:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// scratch is one search's working memory: visit marks (an epoch per node) and two heaps.
type scratch struct {
	visited []uint32
	epoch   uint32
	cands   heap // nearest first
	res     heap // farthest first
	out     []cand
}

func newScratch(n int) *scratch { return &scratch{visited: make([]uint32, n)} }

// heap is a binary heap of cands: a min-heap by compareCand, or a max-heap when max is set.
type heap struct{ s []cand }

func (hp *heap) less(i, j int, max bool) bool {
	if max {
		return compareCand(hp.s[i], hp.s[j]) > 0
	}
	return compareCand(hp.s[i], hp.s[j]) < 0
}

func (hp *heap) push(c cand, max bool) {
	hp.s = append(hp.s, c)
	for i := len(hp.s) - 1; i > 0; {
		p := (i - 1) / 2
		if !hp.less(i, p, max) {
			break
		}
		hp.s[i], hp.s[p] = hp.s[p], hp.s[i]
		i = p
	}
}

func (hp *heap) pop(max bool) cand {
	top := hp.s[0]
	n := len(hp.s) - 1
	hp.s[0] = hp.s[n]
	hp.s = hp.s[:n]
	for i := 0; ; {
		w := i
		if l := 2*i + 1; l < n && hp.less(l, w, max) {
			w = l
		}
		if r := 2*i + 2; r < n && hp.less(r, w, max) {
			w = r
		}
		if w == i {
			break
		}
		hp.s[i], hp.s[w] = hp.s[w], hp.s[i]
		i = w
	}
	return top
}
