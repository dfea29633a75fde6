package biencoder

import (
	"fmt"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/gradcache"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// CachedBiTask trains a bi-encoder on the batch of BiTask (B queries, N passages, the same loss
// over the whole B x N score matrix) with the memory of M-row graphs: gradient caching
// (GradCache; Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory
// Limited Setup"; sentence-transformers' CachedMultipleNegativesRankingLoss). Each step
//
//  1. encodes the queries and the passages M rows at a time with forward-only graphs, keeping
//     only the embeddings Q [B,H] and P [N,H];
//  2. computes the loss over Q and P and its gradients G_Q = dL/dQ, G_P = dL/dP in a graph whose
//     inputs are those embeddings;
//  3. runs each M-row chunk again through a training graph whose loss is sum(E_chunk ⊙ G_chunk),
//     whose parameter gradients are the chunk's share of dL/dθ by the chain rule, and sums them.
//
// The optimizer then takes one step on the sum, the gradient of the full batch. Dropout draws each
// chunk's masks from a PCG seeded with (seed, phase, step, tower side, chunk), the same in steps 1
// and 3, so the re-forward reproduces the cached embeddings bit for bit (Step fails otherwise).
// The masks differ from BiTask's (drawn over the whole batch), so with dropout the two tasks
// train the same objective under different masks; without dropout their gradients agree to
// rounding.
//
// With Dynamic (train.dynamic_padding), each chunk is padded only to PaddedLen of its longest
// sequence instead of to its side's length, and runs through that length's pair of M-row graphs,
// built the first time the length is seen and kept for the task's life: at most
// ceil(Len/PadMultiple) pairs a side (8 at L 256), together M·Σ L padded tokens (for L 256,
// 32 + 64 + ... + 256 = 4.5 times the one M x 256 pair's). The gradients are those of fixed
// padding to float32 rounding; the dropout masks depend on the chunk's length too, so a step's
// numbers are a function of (seed, phase, step, batch) as without Dynamic.
type CachedBiTask struct {
	m            *model.BiEncoder
	tok          *tokenize.Tokenizer
	Len          Lengths
	seed, stream uint64
	next         func(step int) (PairBatch, error)
	B, N, M      int
	// Dynamic pads each chunk to its own length bucket; set it before the first Step.
	Dynamic bool
	// sides holds each tower's chunk graphs (0 queries, 1 passages).
	sides [2]*cachedSide
	built int
	// The loss graph of step 2: its inputs Q and P hold the embeddings of step 1.
	qEmb, pEmb *gorgonia.Node
	head       contrastiveHead
	*gradcache.Cache
	lastTru int
	qCut    tokenize.TruncCount
	pCut    tokenize.TruncCount
}

// Salts of the dropout streams of the two sides, XORed into the step's seed.
const (
	saltQuery   = 0x6763717565727921 // "gcquery!"
	saltPassage = 0x6763706173736167 // "gcpassag"
)

// shareCachedBuffers: the chunk graphs share their buffers (model.ShareBuffers). Off only in
// the test that checks sharing changes no bit.
var shareCachedBuffers = true

// cachedSide is one tower's M-row chunk graphs (gradcache.Chunk) by length: that of its side
// (Len), built with the task, and (Dynamic) one per other chunk length seen.
type cachedSide struct {
	tower  *model.Tower
	name   string
	L      int
	salt   uint64
	graphs map[int]*gradcache.Chunk
}

// graphs returns side s's chunk graphs of length L, building them the first time.
func (t *CachedBiTask) graphs(s *cachedSide, L int) (*gradcache.Chunk, error) {
	if c := s.graphs[L]; c != nil {
		return c, nil
	}
	c, err := gradcache.NewChunk(func(b *model.Binder, in *model.Inputs) (*gorgonia.Node, error) { return s.tower.Build(b, in, true) },
		s.tower.Dtype(), t.M, L, s.name, shareCachedBuffers)
	if err != nil {
		return nil, err
	}
	s.graphs[L] = c
	if L != s.L {
		t.built++
	}
	return c, nil
}

// chunk returns rows [c*M, (c+1)*M) of batch tb (tb.L positions each).
func (t *CachedBiTask) chunk(tb tokenize.Batch, c int) tokenize.Batch {
	lo, hi := c*t.M*tb.L, (c+1)*t.M*tb.L
	cb := tokenize.Batch{B: t.M, L: tb.L, IDs: tb.IDs[lo:hi], Mask: tb.Mask[lo:hi]}
	if tb.Types != nil {
		cb.Types = tb.Types[lo:hi]
	}
	return cb
}

// side returns the gradcache side of s with its batch tb: chunk c padded to its length bucket
// with Dynamic, its graphs built the first time.
func (t *CachedBiTask) side(s *cachedSide, tb tokenize.Batch, emb *gorgonia.Node, rows int) gradcache.Side {
	return gradcache.Side{Name: s.name, Emb: emb, Rows: rows, Seed: t.seed ^ t.stream ^ s.salt, SetRNG: t.m.SetRNG,
		Chunk: func(c int) (*gradcache.Chunk, tokenize.Batch, error) {
			cb := t.chunk(tb, c)
			L := s.L
			if t.Dynamic {
				L = PaddedLen(Longest(cb), s.L)
			}
			g, err := t.graphs(s, L)
			return g, Cut(cb, L), err
		}}
}

// Built is the number of chunk-graph pairs built beyond the two of the maximum lengths
// (Dynamic: one per other chunk length seen).
func (t *CachedBiTask) Built() int { return t.built }

// NewCachedBiTask is NewBiTask with gradient caching over chunks of M = o.MiniBatch rows; M
// must divide o.B and o.N; with o.Dynamic each chunk is padded to its own bucket. The other
// options are those of NewBiTask; tok may be nil when the task is run with StepTokens only.
func NewCachedBiTask(m *model.BiEncoder, tok *tokenize.Tokenizer, o TaskOptions) (*CachedBiTask, error) {
	B, N, M, lens, loss, masked := o.B, o.N, o.MiniBatch, o.Lengths, o.Loss, o.Masked
	if lens.Query < 2 || lens.Passage < 2 {
		return nil, fmt.Errorf("bi-encoder task: lengths %d (queries) and %d (passages) leave no room for [CLS] and [SEP]", lens.Query, lens.Passage)
	}
	if M < 1 || B%M != 0 || N%M != 0 {
		return nil, fmt.Errorf("cached bi-encoder task: mini-batches of %d rows do not divide %d queries and %d passages", M, B, N)
	}
	t := &CachedBiTask{m: m, tok: tok, Len: lens, seed: o.Seed, stream: o.Stream, next: o.Next, B: B, N: N, M: M, Dynamic: o.Dynamic}
	t.sides[0] = &cachedSide{tower: m.Query, name: "query", L: lens.Query, salt: saltQuery, graphs: map[int]*gradcache.Chunk{}}
	t.sides[1] = &cachedSide{tower: m.Passage, name: "passage", L: lens.Passage, salt: saltPassage, graphs: map[int]*gradcache.Chunk{}}
	var bound [2][]model.Bound
	for k, s := range t.sides {
		c, err := t.graphs(s, s.L)
		if err != nil {
			return nil, err
		}
		bound[k] = c.Bound()
	}
	dt := m.Query.Dtype()
	g := gorgonia.NewGraph()
	t.qEmb = gradcache.Input(g, dt, "Q", B, m.Query.Dim())
	t.pEmb = gradcache.Input(g, dt, "P", N, m.Passage.Dim())
	var err error
	if t.head, err = newContrastiveHead(g, t.qEmb, t.pEmb, B, N, loss, masked); err != nil {
		return nil, err
	}
	if t.Cache, err = gradcache.New(M, t.head.loss, []*gorgonia.Node{t.qEmb, t.pEmb}, bound[:]...); err != nil {
		return nil, err
	}
	return t, nil
}

// Step runs the three passes on step's batch and leaves the batch's gradient in Params.
func (t *CachedBiTask) Step(step int) (float64, int, error) {
	pb, qb, pbt, err := nextBatch(t.next, t.tok, step, t.B, t.N, t.Len, &t.qCut, &t.pCut)
	if err != nil {
		return 0, 0, err
	}
	t.lastTru = qb.Truncated + pbt.Truncated
	return t.StepTokens(step, pb, qb, pbt)
}

// StepTokens is Step on a batch already tokenized: q holds B sequences of Len.Query tokens,
// p N of Len.Passage; pb supplies the candidate mask and teacher scores the loss reads.
func (t *CachedBiTask) StepTokens(step int, pb PairBatch, q, p tokenize.Batch) (float64, int, error) {
	if err := t.head.fill(pb); err != nil {
		return 0, 0, err
	}
	if len(q.IDs) != t.B*t.Len.Query || len(p.IDs) != t.N*t.Len.Passage {
		return 0, 0, fmt.Errorf("cached bi-encoder task: %d query and %d passage tokens, want %d x %d and %d x %d",
			len(q.IDs), len(p.IDs), t.B, t.Len.Query, t.N, t.Len.Passage)
	}
	loss, err := t.Cache.Step(step, t.side(t.sides[0], q, t.qEmb, t.B), t.side(t.sides[1], p, t.pEmb, t.N))
	if err != nil {
		return 0, 0, fmt.Errorf("cached bi-encoder task: %w", err)
	}
	return loss, t.B, nil
}

// gradient returns the summed gradient of the parameter named name, as float64.
func (t *CachedBiTask) gradient(name string) []float64 { return t.Gradient(name) }

// Close releases the machines.
func (t *CachedBiTask) Close() {
	for _, s := range t.sides {
		for _, c := range s.graphs {
			c.Close()
		}
	}
	t.Cache.Close()
}

// Truncation reports what truncation cut of the queries and of the passages over the steps run.
func (t *CachedBiTask) Truncation() (int, []tokenize.TruncPart) {
	return t.Len.Query, []tokenize.TruncPart{
		{Name: "queries", Count: &t.qCut, L: t.Len.Query},
		{Name: "passages", Count: &t.pCut, L: t.Len.Passage},
	}
}
