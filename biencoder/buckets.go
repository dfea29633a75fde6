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
	*GraphCache[Lengths, *bucketGraph]
	qCut tokenize.TruncCount // what truncation to Len.Query cut of the queries, over the steps run
	pCut tokenize.TruncCount // and truncation to Len.Passage of the passages
}

// bucketGraph is one cached graph.
type bucketGraph struct{ biGraph }

func (g *bucketGraph) Close() { g.vm.Close() }

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
	t := &BucketedBiTask{m: m, tok: tok, Len: lens, seed: o.Seed, stream: o.Stream, next: o.Next, loss: o.Loss, masked: o.Masked,
		opt: opt, B: B, N: N}
	t.GraphCache = &GraphCache[Lengths, *bucketGraph]{What: "bi-encoder task", MaxGraphs: opt.MaxGraphs, MaxTokens: opt.MaxTokens, Tokens: t.tokens,
		Build: func(l Lengths) (*bucketGraph, error) {
			bg, err := newBiGraph(m, B, N, l, o.Loss, o.Masked)
			return &bucketGraph{bg}, err
		}}
	return t, nil
}

// tokens is the padded tokens of a graph of shape l.
func (t *BucketedBiTask) tokens(l Lengths) int { return t.B*l.Query + t.N*l.Passage }

// BucketGraph is a training graph a GraphCache keeps: the trainer's parameters with its
// gradients, and its machine.
type BucketGraph interface {
	Params() []trainer.Param
	AfterUpdate()
	Close()
}

// GraphCache keeps the training graphs of the padded shapes K a bucketed task has seen
// (BucketedBiTask, colbert.BucketedTask), least recently used first, within two bounds:
// MaxGraphs graphs and MaxTokens padded tokens together (Tokens(k), the tokens of the graph of
// shape k); the least recently used go first (closed), the graph of the current step is always
// kept. Every graph binds the same parameters in the same order (checked), so Params is one
// list whatever the graph and AdamW's moments carry across shapes. Not safe for concurrent use.
type GraphCache[K comparable, G BucketGraph] struct {
	What                 string // names the task in errors
	MaxGraphs, MaxTokens int
	Tokens               func(K) int
	Build                func(K) (G, error)
	graphs               []*cachedGraph[K, G] // least recently used first
	active               *cachedGraph[K, G]   // the graph of the last Get
	params               []trainer.Param
	built                int
}

type cachedGraph[K comparable, G BucketGraph] struct {
	key K
	g   G
}

// Get returns the graph of shape k, most recently used now and the active one (Ran, AfterUpdate),
// building it (after evicting what the bounds require) the first time.
func (c *GraphCache[K, G]) Get(k K) (G, error) {
	for i, e := range c.graphs {
		if e.key == k {
			c.graphs = append(append(c.graphs[:i:i], c.graphs[i+1:]...), e)
			c.active = e
			return e.g, nil
		}
	}
	total := c.Tokens(k)
	for _, e := range c.graphs {
		total += c.Tokens(e.key)
	}
	evicted := false
	for len(c.graphs) > 0 && (len(c.graphs)+1 > c.MaxGraphs || total > c.MaxTokens) {
		e := c.graphs[0]
		total -= c.Tokens(e.key)
		e.g.Close()
		c.graphs[0] = nil
		c.graphs = c.graphs[1:]
		if e == c.active {
			c.active = nil
		}
		evicted = true
	}
	if evicted {
		for i := range c.params { // the last step's gradients, zero since AfterUpdate
			c.params[i].Grad = nil
		}
		// Return the evicted graphs' buffers before the new graph allocates its own, so that
		// the heap does not grow past the bound while the collector waits for its goal. Two
		// cycles: the first leaves some of them reachable for one more (sync.Pool's victim
		// caches); measured, one cycle freed nothing of a MiniLM graph, two freed all of it.
		runtime.GC()
		runtime.GC()
	}
	g, err := c.Build(k)
	if err != nil {
		return g, err
	}
	ps := g.Params()
	if c.params == nil {
		c.params = make([]trainer.Param, len(ps))
		for i, p := range ps {
			c.params[i] = trainer.Param{Name: p.Name, Value: p.Value}
		}
	} else {
		if len(ps) != len(c.params) {
			return g, fmt.Errorf("%s: graph of %v binds %d parameters, the first graph %d", c.What, k, len(ps), len(c.params))
		}
		for i, p := range ps {
			if p.Name != c.params[i].Name || &p.Value[0] != &c.params[i].Value[0] {
				return g, fmt.Errorf("%s: graph of %v binds parameter %d as %s, the first graph as %s", c.What, k, i, p.Name, c.params[i].Name)
			}
		}
	}
	c.active = &cachedGraph[K, G]{key: k, g: g}
	c.graphs = append(c.graphs, c.active)
	c.built++
	return g, nil
}

// Ran points Params' gradients at those of the active graph's last run.
func (c *GraphCache[K, G]) Ran() {
	for i, p := range c.active.g.Params() {
		c.params[i].Grad = p.Grad
	}
}

// Params are the model's parameters, one list whatever the graph, with the gradients of the
// last run (nil before the first).
func (c *GraphCache[K, G]) Params() []trainer.Param { return c.params }

// AfterUpdate zeroes the gradients of the active graph and resets its machine.
func (c *GraphCache[K, G]) AfterUpdate() {
	if c.active != nil {
		c.active.g.AfterUpdate()
	}
}

// Built is the number of graphs built so far (one per shape seen, again after an eviction).
func (c *GraphCache[K, G]) Built() int { return c.built }

// Cached returns the shapes of the cached graphs, least recently used first.
func (c *GraphCache[K, G]) Cached() []K {
	ks := make([]K, len(c.graphs))
	for i, e := range c.graphs {
		ks[i] = e.key
	}
	return ks
}

// Close releases every cached graph.
func (c *GraphCache[K, G]) Close() {
	for _, e := range c.graphs {
		e.g.Close()
	}
	c.graphs, c.active = nil, nil
}

// Longest is the most tokens of a row of b (its mask's leading ones).
func Longest(b tokenize.Batch) int {
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

// Cut returns b with every row cut to its first L positions (L >= Longest(b): padding only); nil
// Types stay nil.
func Cut(b tokenize.Batch, L int) tokenize.Batch {
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
	return Lengths{Query: PaddedLen(Longest(q), t.Len.Query), Passage: PaddedLen(Longest(p), t.Len.Passage)}
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
	g, err := t.Get(l)
	if err != nil {
		return 0, 0, err
	}
	loss, err := g.run(t.m, t.seed^t.stream, step, pb, Cut(q, l.Query), Cut(p, l.Passage))
	if err != nil {
		return 0, 0, err
	}
	t.Ran()
	return loss, t.B, nil
}

// Truncation reports what truncation cut of the queries (to Len.Query) and of the passages (to
// Len.Passage) over the steps run, as BiTask reports it.
func (t *BucketedBiTask) Truncation() (int, []tokenize.TruncPart) {
	return t.Len.Query, []tokenize.TruncPart{
		{Name: "queries", Count: &t.qCut, L: t.Len.Query},
		{Name: "passages", Count: &t.pCut, L: t.Len.Passage},
	}
}
