package colbert

import (
	"fmt"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/gradcache"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// CachedTask trains a ColBERT model on Task's batch (B queries, N passages, the same loss over
// the whole batch) with the memory of M-row graphs: gradient caching (GradCache; Gao et al.
// 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"; PyLate 1.6's
// losses.CachedContrastive, its mini_batch_size; here for colbert_kl_distill too),
// train.mini_batch_size = M. Each step
//
//  1. encodes the queries and the passages M rows at a time with forward-only graphs, keeping
//     only the projected token vectors Q [B,Lq,Dim] and P [N,Ld,Dim] (Lq = QueryLength, Ld =
//     DocumentLength; not normalised: the loss normalises, as in Task);
//  2. computes the loss over Q and P (MaxSim from the token matrices, the passages' scored
//     tokens masked as in Task) and its gradients G_Q = dL/dQ, G_P = dL/dP in a graph whose
//     inputs are those token vectors;
//  3. runs each M-row chunk again through a training graph whose loss is sum(T_chunk ⊙
//     G_chunk) over its token vectors T, whose parameter gradients are the chunk's share of
//     dL/dθ by the chain rule, and sums them.
//
// The optimizer then takes one step on the sum, the full batch's gradient. Dropout draws each
// chunk's masks from a PCG seeded with (seed, side, step, chunk), the same in steps 1 and 3, so
// the re-forward reproduces the cached token vectors bit for bit (Step fails otherwise); the
// masks differ from Task's (drawn over the whole batch), so without dropout the two tasks'
// gradients agree to rounding and with dropout they train the same objective under other
// masks.
//
// With Dynamic (train.dynamic_padding), each passage chunk is padded only to BucketLen of its
// longest passage and runs through that length's pair of graphs (built the first time the
// length is seen, kept for the task's life: at most ceil(DocumentLength/PadMultiple) lengths
// besides QueryLength, 6 pairs at 180 and 32, each training graph holding one gradient per
// parameter, 91 MB for MiniLM); its token vectors fill the first positions of its rows of P,
// the rest 0 and unscored, so the loss is Task's. Queries are always QueryLength tokens (every one
// scored); a bucket of QueryLength shares the queries' graphs.
type CachedTask struct {
	source
	o      TaskOptions
	M      int
	chunks map[int]*gradcache.Chunk // by length
	built  int
	q, p   *gorgonia.Node // the cached token vectors [B,Lq,Dim], [N,Ld,Dim]
	head   head
	*gradcache.Cache
}

// Salts of the two sides' dropout streams, XORed into the seed.
const (
	saltQuery   = 0x636371756572793a // "ccquery:"
	saltPassage = 0x636370617373673a // "ccpassg:"
)

// NewCachedTask is NewTask with gradient caching over chunks of M = o.MiniBatch rows (M divides
// o.B and o.N); with o.Dynamic each passage chunk is padded to its own bucket. The model may be
// float64 (tests; Params is then empty).
func NewCachedTask(m *Model, tok *tokenize.Tokenizer, o TaskOptions) (*CachedTask, error) {
	src, err := newSource(m, tok, o.B, o.N, o.Next)
	if err != nil {
		return nil, err
	}
	spec, err := lossSpec(o.Loss, o.B, o.N)
	if err != nil {
		return nil, err
	}
	M := o.MiniBatch
	if M < 1 || o.B%M != 0 || o.N%M != 0 {
		return nil, fmt.Errorf("colbert: mini-batches of %d rows do not divide %d queries and %d passages", M, o.B, o.N)
	}
	t := &CachedTask{source: src, o: o, M: M, chunks: map[int]*gradcache.Chunk{}}
	for _, L := range []int{m.Cfg.QueryLength, m.Cfg.DocumentLength} {
		if _, err := t.graphs(L); err != nil {
			return nil, err
		}
	}
	t.built = 0
	dt, D := m.Proj.Value.Dtype(), m.Cfg.Dim
	g := gorgonia.NewGraph()
	t.q, t.p = gradcache.Input(g, dt, "Q", o.B, m.Cfg.QueryLength, D), gradcache.Input(g, dt, "P", o.N, m.Cfg.DocumentLength, D)
	if t.head, err = newHead(g, t.q, t.p, o.Loss, spec); err != nil {
		return nil, err
	}
	if t.Cache, err = gradcache.New(M, t.head.Loss, []*gorgonia.Node{t.q, t.p}, t.chunks[m.Cfg.QueryLength].Bound()); err != nil {
		return nil, fmt.Errorf("colbert: %w", err)
	}
	return t, nil
}

// graphs returns the chunk graphs of length L, building them the first time.
func (t *CachedTask) graphs(L int) (*gradcache.Chunk, error) {
	if c := t.chunks[L]; c != nil {
		return c, nil
	}
	c, err := gradcache.NewChunk(func(b *model.Binder, in *model.Inputs) (*gorgonia.Node, error) { return t.m.BuildTokens(b, in, true) },
		t.m.Proj.Value.Dtype(), t.M, L, fmt.Sprintf("chunk%d", L), true)
	if err != nil {
		return nil, fmt.Errorf("colbert: %w", err)
	}
	t.chunks[L] = c
	t.built++
	return c, nil
}

// Built is the number of chunk-graph pairs built beyond those of QueryLength and
// DocumentLength (Dynamic: one per other passage bucket seen).
func (t *CachedTask) Built() int { return t.built }

// Step encodes step's batch as Task does and runs the three passes on it, leaving the batch's
// gradient in Params.
func (t *CachedTask) Step(step int) (float64, int, error) {
	b, q, p, err := t.batch(step)
	if err != nil {
		return 0, 0, err
	}
	return t.stepEncoded(step, b, q, p)
}

// side is the gradcache side of the texts e (the loss graph's node of their token vectors
// node): its chunks padded to their own buckets when bucket.
func (t *CachedTask) side(name string, e Encoded, node *gorgonia.Node, salt uint64, bucket bool) gradcache.Side {
	return gradcache.Side{Name: name, Emb: node, Rows: e.B, Seed: t.o.Seed ^ salt, SetRNG: t.m.Enc.SetRNG,
		Chunk: func(c int) (*gradcache.Chunk, tokenize.Batch, error) {
			ce := e.rows(c*t.M, (c+1)*t.M)
			if bucket {
				ce = cutEncoded(ce, BucketLen(biencoder.Longest(ce.Batch), ce.L))
			}
			g, err := t.graphs(ce.L)
			return g, ce.Batch, err
		}}
}

func (t *CachedTask) stepEncoded(step int, b Batch, q, p Encoded) (float64, int, error) {
	if err := t.head.fill(b, p.Score); err != nil {
		return 0, 0, err
	}
	loss, err := t.Cache.Step(step, t.side("query", q, t.q, saltQuery, false), t.side("passage", p, t.p, saltPassage, t.o.Dynamic))
	if err != nil {
		return 0, 0, fmt.Errorf("colbert: cached task: %w", err)
	}
	return loss, t.o.B, nil
}

// Close releases the machines.
func (t *CachedTask) Close() {
	for _, c := range t.chunks {
		c.Close()
	}
	t.Cache.Close()
}
