package colbert

import (
	"math/rand/v2"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// TaskOptions are the settings of a ColBERT training task (NewTrainTask picks plain, length
// buckets or gradient caching from them).
type TaskOptions struct {
	// B and N are the queries and passages of a step (Batch's layout).
	B, N int
	Loss Loss
	// Seed seeds each step's dropout masks.
	Seed uint64
	// Next gives each step's batch in text.
	Next func(step int) (Batch, error)
	// MiniBatch is the rows a gradient-cached task (NewCachedTask) encodes at a time
	// (train.mini_batch_size); it divides B and N. 0: no caching.
	MiniBatch int
	// Dynamic pads the passages of a step (of a chunk, with MiniBatch) to their own length
	// bucket instead of DocumentLength (train.dynamic_padding).
	Dynamic bool
}

// TrainTask is a ColBERT training task: trainer.Task with the truncation it counted.
type TrainTask interface {
	trainer.Task
	Close()
	Truncation() (int, []tokenize.TruncPart)
}

// NewTrainTask returns the training task o asks for: gradient caching when o.MiniBatch > 0 (its
// passage chunks padded to their own buckets with o.Dynamic), else length buckets with
// o.Dynamic, else the one graph of fixed lengths (Task).
func NewTrainTask(m *Model, tok *tokenize.Tokenizer, o TaskOptions) (TrainTask, error) {
	switch {
	case o.MiniBatch > 0:
		return NewCachedTask(m, tok, o)
	case o.Dynamic:
		return NewBucketedTask(m, tok, o)
	}
	return NewTask(m, tok, o.B, o.N, o.Loss, o.Seed, o.Next)
}

// BucketLen is the length a batch of passages is padded to when its longest has n tokens
// (markers included; maxLen = DocumentLength): DocumentLength when a passage fills it, else
// n+1 rounded up to biencoder.PadMultiple, at most maxLen. The +1 keeps a padding position
// in every passage that has one at DocumentLength: with PyLate's MaskZero masking a padded
// token competes in the max with similarity 0, so a passage padded at DocumentLength and the
// same passage in its bucket score the same (a bucket of exactly n positions would drop that 0
// from the longest passage's max).
func BucketLen(n, maxLen int) int {
	if n >= maxLen {
		return maxLen
	}
	return biencoder.PaddedLen(n+1, maxLen)
}

// cutEncoded returns e with every row cut to its first L positions (L >= the longest row's
// tokens: padding only).
func cutEncoded(e Encoded, L int) Encoded {
	if L == e.L {
		return e
	}
	out := Encoded{Batch: biencoder.Cut(e.Batch, L), Score: make([]float32, e.B*L)}
	for r := range e.B {
		copy(out.Score[r*L:(r+1)*L], e.Score[r*e.L:])
	}
	return out
}

// rows returns rows [lo, hi) of e.
func (e Encoded) rows(lo, hi int) Encoded {
	a, b := lo*e.L, hi*e.L
	return Encoded{Batch: tokenize.Batch{B: hi - lo, L: e.L, IDs: e.IDs[a:b], Mask: e.Mask[a:b], Types: e.Types[a:b]}, Score: e.Score[a:b]}
}

// BucketedTask is Task with length buckets (train.dynamic_padding): each step's passages are
// encoded as Task encodes them, then padded only to BucketLen of their longest instead of
// DocumentLength, and the step runs the training graph of that length, built the first time it
// is seen and cached (at most biencoder.DefaultBucketGraphs graphs, together no more padded
// tokens than Task's one graph, B·QueryLength + N·DocumentLength; the least recently used
// evicted first; the graph of the step always kept). Queries stay at QueryLength: every query
// token, [MASK] expansion included, is scored. Padding is out of attention and, by BucketLen,
// scores as at DocumentLength, so loss and gradients are Task's to float32 rounding; dropout
// masks depend on (seed, step) and the bucket, a function of the batch, so a resumed run
// continues exactly (the masks differ from Task's).
//
// Params is one list for every graph (the model's tensors by name, so AdamW's moments carry
// across buckets); after Step each Grad points at the gradients of the graph that ran.
type BucketedTask struct {
	source
	o TaskOptions
	// The graphs by passage length.
	*biencoder.GraphCache[int, *bucketGraph]
}

type bucketGraph struct {
	*Graph
	gp trainer.GraphParams
}

func (g *bucketGraph) Params() []trainer.Param { return g.gp.Params() }
func (g *bucketGraph) AfterUpdate()            { g.gp.AfterUpdate() }
func (g *bucketGraph) Close()                  { g.VM.Close() }

// NewBucketedTask returns the bucketed task of m (float32) for o.B queries and o.N passages a
// step; no graph is built before the first Step.
func NewBucketedTask(m *Model, tok *tokenize.Tokenizer, o TaskOptions) (*BucketedTask, error) {
	src, err := newSource(m, tok, o.B, o.N, o.Next)
	if err != nil {
		return nil, err
	}
	if _, err := lossSpec(o.Loss, o.B, o.N); err != nil {
		return nil, err
	}
	t := &BucketedTask{source: src, o: o}
	t.GraphCache = &biencoder.GraphCache[int, *bucketGraph]{What: "colbert: passage length", MaxGraphs: biencoder.DefaultBucketGraphs,
		MaxTokens: o.B*m.Cfg.QueryLength + o.N*m.Cfg.DocumentLength,
		Tokens:    func(L int) int { return o.B*m.Cfg.QueryLength + o.N*L },
		Build: func(L int) (*bucketGraph, error) {
			g, err := newGraph(m, o.B, o.N, L, o.Loss, true)
			if err != nil {
				return nil, err
			}
			return &bucketGraph{Graph: g, gp: trainer.NewGraphParams(g.Binder, g.VM)}, nil
		}}
	return t, nil
}

// Step encodes step's batch, picks its bucket and runs its graph forward and backward.
func (t *BucketedTask) Step(step int) (float64, int, error) {
	b, q, p, err := t.batch(step)
	if err != nil {
		return 0, 0, err
	}
	L := BucketLen(biencoder.Longest(p.Batch), t.m.Cfg.DocumentLength)
	g, err := t.Get(L)
	if err != nil {
		return 0, 0, err
	}
	if err := g.fill(q, cutEncoded(p, L), b); err != nil {
		return 0, 0, err
	}
	t.m.Enc.SetRNG(rand.New(rand.NewPCG(t.o.Seed, uint64(step))))
	if err := g.gp.Run(); err != nil {
		return 0, 0, err
	}
	t.Ran()
	return trainer.ScalarValue(g.Loss), t.o.B, nil
}
