package model

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CrossEncoder scores a (query, passage) pair by reading both at once
// (monoBERT; Nogueira and Cho, 2019, "Passage Re-ranking with BERT"): the
// pair enters as one sequence
//
//	[CLS] query [SEP] passage [SEP]      token types 0 ... 0 | 1 ... 1
//
// (tokenize.EncodePairBatch builds it), the transformer encoder of this
// package (Tower, with its token-type embeddings) turns it into token
// states, pooling makes one vector ([CLS] with Pooling "cls", the masked mean
// with "mean"), and a linear head gives one relevance score, a logit:
//
//	a = w · pool(Transformer(pair)) + b      w [1,H], b [1]
//
// Unlike a bi-encoder, every query token attends to every passage token, so
// the passage cannot be encoded ahead of the query: a cross-encoder rescores
// the few candidates of a first-stage retriever (a reranker).
//
// Parameters: the encoder's, named as in transformer.go with the prefix
// "encoder", then
//
//	head.weight   [1,H]   N(0, 0.02²) (BERT's classifier initialisation)
//	head.bias     [1]     0
type CrossEncoder struct {
	Cfg     EncoderConfig
	Encoder *Tower // prefix "encoder"

	head []*Param // head.weight, head.bias
	rng  *RNG
}

// Names of the cross-encoder's head parameters.
const (
	HeadWeight = "head.weight"
	HeadBias   = "head.bias"
)

// NewCrossEncoder validates cfg, which must describe a transformer (the bow
// encoder averages its tokens and has no token types, so it cannot tell the
// query from the passage), and initialises float32 parameters from seed: the
// encoder's draws first, as NewBiEncoder's shared tower, then the head's.
// Dropout masks come from a PCG seeded with seed until SetRNG replaces it.
func NewCrossEncoder(cfg EncoderConfig, seed uint64) (*CrossEncoder, error) {
	return newCrossEncoder(cfg, seed, tensor.Float32)
}

func newCrossEncoder(cfg EncoderConfig, seed uint64, dt tensor.Dtype) (*CrossEncoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Encoder != EncoderTransformer {
		return nil, fmt.Errorf("model: cross-encoder: encoder = %q, want %q (a cross-encoder needs token types to tell the query from the passage)", cfg.Encoder, EncoderTransformer)
	}
	if cfg.Causal {
		return nil, fmt.Errorf("model: cross-encoder: causal = true: the query and the passage must see each other")
	}
	m := &CrossEncoder{Cfg: cfg, rng: &RNG{R: rand.New(rand.NewPCG(seed, streamDropout))}}
	r := rand.New(rand.NewPCG(seed, streamInit))
	m.Encoder = newTower(PrefixShared, cfg, r, m.rng, dt)
	w := newParam(HeadWeight, dt, 1, cfg.Hidden)
	w.normal(r, 0.02)
	b := newParam(HeadBias, dt, 1)
	b.constant(0)
	m.head = []*Param{w, b}
	if err := checkUnique(m.Params()); err != nil {
		return nil, err
	}
	return m, nil
}

// Params returns the parameters, each once, in a fixed order: the encoder's,
// then head.weight and head.bias.
func (m *CrossEncoder) Params() []*Param {
	return append(m.Encoder.Params(), m.head...)
}

// Param returns the parameter of that checkpoint name, or nil.
func (m *CrossEncoder) Param(name string) *Param {
	for _, p := range m.Params() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// SetRNG makes dropout draw its masks from r, in every graph built from this
// model (the trainer reseeds it each step for reproducible runs).
func (m *CrossEncoder) SetRNG(r *rand.Rand) { m.rng.R = r }

// Score adds the cross-encoder to the binder's graph for a batch of B pair
// sequences of length L (in, as tokenize.EncodePairBatch lays them out) and
// returns the scores [B], one logit per pair. With train, dropout is active.
func (m *CrossEncoder) Score(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	x, err := m.Encoder.Build(b, in, train)
	if err != nil {
		return nil, err
	}
	if x, err = m.Encoder.dropout(x, train); err != nil {
		return nil, err
	}
	s, err := Linear(x, b.Node(m.head[0]), b.Node(m.head[1])) // [B,1]
	if err != nil {
		return nil, err
	}
	out, err := gorgonia.Reshape(s, tensor.Shape{in.B})
	if err != nil {
		return nil, fmt.Errorf("model: cross-encoder: %w", err)
	}
	return out, nil
}

// ScoreRunner scores many pairs with a cross-encoder for inference (e.g. a
// first stage's top-k of every test query): it builds a B x L inference graph
// once (no dropout) and runs it per batch of B pairs, reading the model's
// current parameter values at every run. Not safe for concurrent use.
type ScoreRunner struct {
	*batchRunner
}

// NewScoreRunner builds the inference graph of m for batches of B pair
// sequences of length L.
func NewScoreRunner(m *CrossEncoder, B, L int) (*ScoreRunner, error) {
	r, err := newBatchRunner(B, L, 1, "pair.score", m.Encoder.dt, func(b *Binder, in *Inputs) (*gorgonia.Node, error) {
		return m.Score(b, in, false)
	})
	if err != nil {
		return nil, err
	}
	return &ScoreRunner{r}, nil
}

// Score scores n pair sequences of length L given row-major (ids, mask and
// types hold n*L values each) and returns n scores. The last partial batch is
// padded with empty sequences, whose scores are discarded.
func (r *ScoreRunner) Score(ids []int, mask []float32, types []int, n int) ([]float32, error) {
	l := r.l
	if n < 0 || len(ids) != n*l || len(mask) != n*l || len(types) != n*l {
		return nil, fmt.Errorf("model: score: %d pairs of length %d need %d ids, mask values and types; got %d, %d, %d",
			n, l, n*l, len(ids), len(mask), len(types))
	}
	return r.run(ids, mask, types, n, "score pairs")
}
