package biencoder

import (
	"fmt"
	"runtime"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// DefaultBucketGraphs is K, the most training graphs a BucketedBiTask keeps by default. Besides
// its activations (bounded together by BucketOptions.MaxTokens), each graph holds one gradient
// per parameter: MiniLM's 22.7M parameters are 91 MB a graph, so 4 graphs add at most 273 MB
// to what fixed padding holds.
const DefaultBucketGraphs = 4

// BucketOptions bound the graphs a BucketedBiTask keeps between steps. A graph keeps the
// buffers its ops share (model.ShareBuffers) between runs, so a cached graph holds about the
// peak memory of its step, which grows with its padded tokens B·Lq + N·Lp.
type BucketOptions struct {
	// MaxGraphs is K, the most graphs cached (least recently used evicted first); 0 means
	// DefaultBucketGraphs.
	MaxGraphs int
	// MaxTokens bounds the padded tokens of the cached graphs together, Σ B·Lq + N·Lp; 0 means
	// B·Len.Query + N·Len.Passage, the one graph of fixed padding, so that the cached graphs
	// together never hold more activations than fixed padding's graph (a recipe whose step fits
	// with fixed padding fits with buckets). The graph of the current step is always kept.
	MaxTokens int
}

// BucketedBiTask is BiTask with dynamic padding (train.dynamic_padding): each step's batch is
// tokenized first (cut to Len.Query and Len.Passage tokens, counted as BiTask counts), the
// queries are padded to Lq = PaddedLen of their longest and the passages to Lp = PaddedLen of
// theirs (multiples of PadMultiple, at most Len), and the step runs the training graph of
// shape (B x Lq, N x Lp), built the first time that shape is seen and cached (BucketOptions
// bound the cache; an evicted graph is closed). Padding is masked out of attention and pooling,
// so loss and gradients are BiTask's to float32 rounding (summation order); dropout masks
// depend on (seed, phase, step) and the step's shape, itself a function of the batch, so the
// same seed gives the same numbers and a resumed run continues exactly.
//
// Params is one list for every graph (the model's tensors, by the same names, so AdamW's
// moments carry across buckets); after Step each Grad points at the gradients of the graph
// that ran. Not safe for concurrent use.
type BucketedBiTask struct {
	m      *model.BiEncoder
	tok    *tokenize.Tokenizer
	Len    Lengths // the queries' and the passages' maximum lengths, in tokens
	seed   uint64
	stream uint64
	next   func(step int) (PairBatch, error)
	loss   ContrastiveLoss
	masked bool
	opt    BucketOptions
	B, N   int
	graphs []*bucketGraph // cached, least recently used first
	active *bucketGraph   // the graph of the last Step
	params []trainer.Param
	built  int
	qCut   tokenize.TruncCount // what truncation to Len.Query cut of the queries, over the steps run
	pCut   tokenize.TruncCount // and truncation to Len.Passage of the passages
}

// bucketGraph is one cached graph and its shape.
type bucketGraph struct {
	biGraph
	len Lengths
}

// NewBucketedBiTask returns the bucketed task of m for o.B queries and o.N passages a step, cut
// to o.Lengths, with NewBiTask's loss, mask, seed, stream and batches; o.Buckets bounds the
// cached graphs. No graph is built before the first Step.
func NewBucketedBiTask(m *model.BiEncoder, tok *tokenize.Tokenizer, o TaskOptions) (*BucketedBiTask, error) {
	B, N, lens, opt := o.B, o.N, o.Lengths, o.Buckets
	if lens.Query < 2 || lens.Passage < 2 {
		return nil, fmt.Errorf("bi-encoder task: lengths %d (queries) and %d (passages) leave no room for [CLS] and [SEP]", lens.Query, lens.Passage)
	}
	if opt.MaxGraphs < 0 || opt.MaxTokens < 0 {
		return nil, fmt.Errorf("bi-encoder task: bucket bounds %d graphs, %d tokens: want >= 0 (0 = default)", opt.MaxGraphs, opt.MaxTokens)
	}
	if opt.MaxGraphs == 0 {
		opt.MaxGraphs = DefaultBucketGraphs
	}
	if opt.MaxTokens == 0 {
		opt.MaxTokens = B*lens.Query + N*lens.Passage
	}
	return &BucketedBiTask{m: m, tok: tok, Len: lens, seed: o.Seed, stream: o.Stream, next: o.Next, loss: o.Loss, masked: o.Masked,
		opt: opt, B: B, N: N}, nil
}

// tokens is the padded tokens of a graph of shape l.
func (t *BucketedBiTask) tokens(l Lengths) int { return t.B*l.Query + t.N*l.Passage }

// graph returns the cached graph of shape l, most recently used now, building it (after
// evicting what the bounds require) the first time.
func (t *BucketedBiTask) graph(l Lengths) (*bucketGraph, error) {
	for i, g := range t.graphs {
		if g.len == l {
			t.graphs = append(append(t.graphs[:i:i], t.graphs[i+1:]...), g)
			return g, nil
		}
	}
	total := t.tokens(l)
	for _, g := range t.graphs {
		total += t.tokens(g.len)
	}
	evicted := false
	for len(t.graphs) > 0 && (len(t.graphs)+1 > t.opt.MaxGraphs || total > t.opt.MaxTokens) {
		g := t.graphs[0]
		total -= t.tokens(g.len)
		g.vm.Close()
		t.graphs[0] = nil
		t.graphs = t.graphs[1:]
		if g == t.active {
			t.active = nil
		}
		evicted = true
	}
	if evicted {
		for i := range t.params { // the last step's gradients, zero since AfterUpdate
			t.params[i].Grad = nil
		}
		// Return the evicted graphs' buffers before the new graph allocates its own, so that
		// the heap does not grow past the bound while the collector waits for its goal. Two
		// cycles: the first leaves some of them reachable for one more (sync.Pool's victim
		// caches); measured, one cycle freed nothing of a MiniLM graph, two freed all of it.
		runtime.GC()
		runtime.GC()
	}
	bg, err := newBiGraph(t.m, t.B, t.N, l, t.loss, t.masked)
	if err != nil {
		return nil, err
	}
	g := &bucketGraph{biGraph: bg, len: l}
	ps := g.Params()
	if t.params == nil {
		t.params = make([]trainer.Param, len(ps))
		for i, p := range ps {
			t.params[i] = trainer.Param{Name: p.Name, Value: p.Value}
		}
	} else {
		if len(ps) != len(t.params) {
			return nil, fmt.Errorf("bi-encoder task: graph of %v binds %d parameters, the first graph %d", l, len(ps), len(t.params))
		}
		for i, p := range ps {
			if p.Name != t.params[i].Name || &p.Value[0] != &t.params[i].Value[0] {
				return nil, fmt.Errorf("bi-encoder task: graph of %v binds parameter %d as %s, the first graph as %s", l, i, p.Name, t.params[i].Name)
			}
		}
	}
	t.graphs = append(t.graphs, g)
	t.built++
	return g, nil
}

// longest is the most tokens of a row of b (its mask's ones).
func longest(b tokenize.Batch) int {
	n := 0
	for i := range b.B {
		row := b.Mask[i*b.L : (i+1)*b.L]
		k := 0
		for k < len(row) && row[k] != 0 {
			k++
		}
		n = max(n, k)
	}
	return n
}

// cut returns b with every row cut to its first L positions (L >= longest(b): padding only); nil
// Types stay nil.
func cut(b tokenize.Batch, L int) tokenize.Batch {
	if L == b.L {
		return b
	}
	out := tokenize.Batch{B: b.B, L: L, IDs: make([]int, b.B*L), Mask: make([]float32, b.B*L),
		Truncated: b.Truncated, Tokens: b.Tokens, Dropped: b.Dropped}
	if b.Types != nil {
		out.Types = make([]int, b.B*L)
	}
	for i := range b.B {
		copy(out.IDs[i*L:(i+1)*L], b.IDs[i*b.L:])
		copy(out.Mask[i*L:(i+1)*L], b.Mask[i*b.L:])
		if b.Types != nil {
			copy(out.Types[i*L:(i+1)*L], b.Types[i*b.L:])
		}
	}
	return out
}

// Shape is the padded lengths the batch of a step runs at: PaddedLen of its longest query and of
// its longest passage (tokenized as Step tokenizes them).
func (t *BucketedBiTask) Shape(q, p tokenize.Batch) Lengths {
	return Lengths{Query: PaddedLen(longest(q), t.Len.Query), Passage: PaddedLen(longest(p), t.Len.Passage)}
}

func (t *BucketedBiTask) Step(step int) (float64, int, error) {
	pb, qb, pbt, err := nextBatch(t.next, t.tok, step, t.B, t.N, t.Len, &t.qCut, &t.pCut)
	if err != nil {
		return 0, 0, err
	}
	return t.StepTokens(step, pb, qb, pbt)
}

// StepTokens is Step on a batch tokenized already: q holds the B queries and p the N passages,
// padded to Len (tokenize.EncodeBatch); pb gives the candidate mask and teacher scores (its
// texts are not read). The truncation counts are Step's to keep.
func (t *BucketedBiTask) StepTokens(step int, pb PairBatch, q, p tokenize.Batch) (float64, int, error) {
	if q.B != t.B || p.B != t.N || q.L != t.Len.Query || p.L != t.Len.Passage {
		return 0, 0, fmt.Errorf("bi-encoder task: batch of %d x %d query and %d x %d passage tokens, want %d x %d and %d x %d",
			q.B, q.L, p.B, p.L, t.B, t.Len.Query, t.N, t.Len.Passage)
	}
	l := t.Shape(q, p)
	g, err := t.graph(l)
	if err != nil {
		return 0, 0, err
	}
	t.active = g
	loss, err := g.run(t.m, t.seed^t.stream, step, pb, cut(q, l.Query), cut(p, l.Passage))
	if err != nil {
		return 0, 0, err
	}
	for i, p := range g.Params() {
		t.params[i].Grad = p.Grad
	}
	return loss, t.B, nil
}

// Params are the model's parameters, one list whatever the graph, with the gradients of the
// last Step (nil before the first).
func (t *BucketedBiTask) Params() []trainer.Param { return t.params }

// AfterUpdate zeroes the gradients of the graph that ran and resets its machine.
func (t *BucketedBiTask) AfterUpdate() {
	if t.active != nil {
		t.active.AfterUpdate()
	}
}

// Built is the number of graphs built so far (one per shape seen, again after an eviction).
func (t *BucketedBiTask) Built() int { return t.built }

// Cached returns the shapes of the cached graphs, least recently used first.
func (t *BucketedBiTask) Cached() []Lengths {
	ls := make([]Lengths, len(t.graphs))
	for i, g := range t.graphs {
		ls[i] = g.len
	}
	return ls
}

// Truncation reports what truncation cut of the queries (to Len.Query) and of the passages (to
// Len.Passage) over the steps run, as BiTask reports it.
func (t *BucketedBiTask) Truncation() (int, []tokenize.TruncPart) {
	return t.Len.Query, []tokenize.TruncPart{
		{Name: "queries", Count: &t.qCut, L: t.Len.Query},
		{Name: "passages", Count: &t.pCut, L: t.Len.Passage},
	}
}

// Close releases every cached graph's machine.
func (t *BucketedBiTask) Close() {
	for _, g := range t.graphs {
		g.vm.Close()
	}
	t.graphs, t.active = nil, nil
}
