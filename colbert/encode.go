package colbert

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/gorgonia"

	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Tokens are the token vectors of texts: text i's scored tokens are the rows Offs[i] ..
// Offs[i+1]-1 of Vecs (row-major, Dim values each, L2-normalised).
type Tokens struct {
	Dim  int
	Vecs []float32
	Offs []int // len = texts + 1, Offs[0] = 0
}

// Len is the number of texts.
func (t *Tokens) Len() int { return len(t.Offs) - 1 }

// Rows returns text i's token vectors, n×Dim.
func (t *Tokens) Rows(i int) []float32 { return t.Vecs[t.Offs[i]*t.Dim : t.Offs[i+1]*t.Dim] }

// Count returns text i's number of token vectors.
func (t *Tokens) Count(i int) int { return t.Offs[i+1] - t.Offs[i] }

// Encoder computes the normalised token vectors of queries and passages with a model in
// inference mode (no dropout), B texts per forward pass (fewer texts: a graph of that many rows
// rounded up to a power of two), one graph per padded length and row count. Not safe
// for concurrent use.
type Encoder struct {
	m      *Model
	tok    *tokenize.Tokenizer
	mk     Markers
	B      int
	graphs map[graphKey]*encGraph
	// QueryCut and DocCut count the texts cut to QueryLength and DocumentLength.
	QueryCut, DocCut tokenize.TruncCount
}

type encGraph struct {
	vm   gorgonia.VM
	in   *model.Inputs
	out  *gorgonia.Node
	rows int
}

// NewEncoder returns an encoder of m running B texts at a time.
func NewEncoder(m *Model, tok *tokenize.Tokenizer, B int) (*Encoder, error) {
	if B < 1 {
		return nil, fmt.Errorf("colbert: encoder batch %d, want >= 1", B)
	}
	mk, err := MarkersOf(tok)
	if err != nil {
		return nil, err
	}
	return &Encoder{m: m, tok: tok, mk: mk, B: B, graphs: map[graphKey]*encGraph{}}, nil
}

// Close releases the graphs.
func (e *Encoder) Close() {
	for _, g := range e.graphs {
		g.vm.Close()
	}
	e.graphs = map[graphKey]*encGraph{}
}

// graphKey names a cached graph: Rows texts of L tokens.
type graphKey struct{ Rows, L int }

// graphRows is the rows of the graph that runs n texts: B when n fills it, else n rounded up to
// a power of two, so a lone query runs a 1-row graph, not B rows of which B-1 are empty. A
// text's vectors do not depend on the rows beside it (TestEncoderRowsDoNotChangeVectors).
func (e *Encoder) graphRows(n int) int {
	rows := 1
	for rows < n && rows < e.B {
		rows *= 2
	}
	return min(rows, e.B)
}

func (e *Encoder) graph(n, L int) (*encGraph, error) {
	k := graphKey{Rows: e.graphRows(n), L: L}
	if g, ok := e.graphs[k]; ok {
		return g, nil
	}
	g := gorgonia.NewGraph()
	in := model.NewInputsOf(g, k.Rows, L, fmt.Sprintf("colbert%dx%d", k.Rows, L), e.m.Proj.Value.Dtype())
	out, err := e.m.BuildTokens(model.NewBinder(g), in, false)
	if err != nil {
		return nil, err
	}
	model.ShareBuffers(g, out)
	eg := &encGraph{vm: gorgonia.NewTapeMachine(g), in: in, out: out, rows: k.Rows}
	e.graphs[k] = eg
	return eg, nil
}

// run encodes the rows lo..hi-1 of enc (at most B) and appends, for each row, its scored
// tokens' normalised vectors to dst, returning dst and the rows' counts.
func (e *Encoder) run(enc Encoded, lo, hi int, dst []float32) ([]float32, []int, error) {
	L, d := enc.L, e.m.Cfg.Dim
	g, err := e.graph(hi-lo, L)
	if err != nil {
		return nil, nil, err
	}
	n := g.rows * L
	ids, mask, types := make([]int, n), make([]float32, n), make([]int, n)
	copy(ids, enc.IDs[lo*L:hi*L])
	copy(mask, enc.Mask[lo*L:hi*L])
	copy(types, enc.Types[lo*L:hi*L])
	if err := g.in.Let(ids, mask, types); err != nil {
		return nil, nil, err
	}
	g.vm.Reset()
	if err := g.vm.RunAll(); err != nil {
		return nil, nil, fmt.Errorf("colbert: encode: %w", err)
	}
	vals := model.Float64s(g.out.Value().(*tensor.Dense))
	counts := make([]int, hi-lo)
	for r := range hi - lo {
		for j := range L {
			if enc.Score[(lo+r)*L+j] == 0 {
				continue
			}
			v := vals[(r*L+j)*d : (r*L+j+1)*d]
			var ss float64
			for _, x := range v {
				ss += x * x
			}
			inv := 1 / math.Max(math.Sqrt(ss), NormEps) // F.normalize's eps
			for _, x := range v {
				dst = append(dst, float32(x*inv))
			}
			counts[r]++
		}
	}
	return dst, counts, nil
}

// NormEps is the floor of a token vector's norm when it is normalised (torch's F.normalize).
const NormEps = 1e-12

// Queries returns the token vectors of queries: QueryLength each ([MASK] expansion included).
func (e *Encoder) Queries(texts []string) (*Tokens, error) {
	enc := e.m.EncodeQueries(e.tok, e.mk, texts)
	e.QueryCut.Add(enc.Batch)
	return e.encode(enc, nil)
}

// Documents returns the token vectors of passages: each cut to DocumentLength tokens, its
// scored tokens (not padding, not the skiplist) in order. Passages are run in order of length,
// each batch padded to a multiple of 16 tokens (one graph per length), so the vectors do not
// depend on the batching: padding is masked out of attention.
func (e *Encoder) Documents(texts []string) (*Tokens, error) {
	toks := make([][]int, len(texts))
	for i, t := range texts {
		toks[i] = e.tok.Encode(t)
	}
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(toks[a]) - len(toks[b]) })
	d := e.m.Cfg.Dim
	rows := make([][]float32, len(texts))
	for lo := 0; lo < len(order); lo += e.B {
		hi := min(lo+e.B, len(order))
		longest := len(toks[order[hi-1]]) + 3 // [CLS], marker, [SEP]
		L := min((longest+15)/16*16, e.m.Cfg.DocumentLength)
		batch := make([][]int, hi-lo)
		for r := range batch {
			batch[r] = toks[order[lo+r]]
		}
		enc := e.m.markDocuments(e.tok.BatchOf(batch, L-1), e.mk)
		e.DocCut.Add(enc.Batch)
		vecs, counts, err := e.run(enc, 0, hi-lo, nil)
		if err != nil {
			return nil, err
		}
		off := 0
		for r, c := range counts {
			rows[order[lo+r]] = vecs[off*d : (off+c)*d]
			off += c
		}
	}
	out := &Tokens{Dim: d, Offs: make([]int, 1, len(texts)+1)}
	for _, r := range rows {
		out.Vecs = append(out.Vecs, r...)
		out.Offs = append(out.Offs, len(out.Vecs)/d)
	}
	return out, nil
}

// encode runs every row of enc, B at a time.
func (e *Encoder) encode(enc Encoded, _ []int) (*Tokens, error) {
	out := &Tokens{Dim: e.m.Cfg.Dim, Offs: []int{0}}
	for lo := 0; lo < enc.B; lo += e.B {
		hi := min(lo+e.B, enc.B)
		var counts []int
		var err error
		if out.Vecs, counts, err = e.run(enc, lo, hi, out.Vecs); err != nil {
			return nil, err
		}
		for _, c := range counts {
			out.Offs = append(out.Offs, out.Offs[len(out.Offs)-1]+c)
		}
	}
	return out, nil
}
