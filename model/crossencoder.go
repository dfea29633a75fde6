package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

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
// package (Tower, with its token-type embeddings) turns it into token states,
// and BERT's sequence-classification head (Devlin et al., 2019; Hugging Face
// BertForSequenceClassification with num_labels = 1) gives one relevance
// score, a logit:
//
//	h = pool(Transformer(pair))                    [B,H]  ([CLS] with Pooling "cls")
//	u = tanh(h · Wpᵀ + bp)                         [B,H]  BERT's pooler
//	a = Dropout(u) · wᵀ + b                        [B]    the classifier
//
// With Pooling "cls" (the BERT layout; export.WriteCrossEncoder needs it) h
// is the [CLS] state, exactly as BertForSequenceClassification computes it;
// with "mean" it is the masked mean of the token states, which no Hugging
// Face head computes (kept for experiments; the exporter refuses it).
// Dropout (Cfg.Dropout, training only) is BERT's classifier dropout.
//
// Unlike a bi-encoder, every query token attends to every passage token, so
// the passage cannot be encoded ahead of the query: a cross-encoder rescores
// the few candidates of a first-stage retriever (a reranker).
//
// Parameters: the encoder's, named as in transformer.go with the prefix
// "encoder", then (HFCrossEncoderName gives the Hugging Face names)
//
//	pooler.weight      [H,H]  N(0, 0.02²)   bert.pooler.dense.weight
//	pooler.bias        [H]    0             bert.pooler.dense.bias
//	classifier.weight  [1,H]  N(0, 0.02²)   classifier.weight
//	classifier.bias    [1]    0             classifier.bias
//
// (BERT's initialisation, initializer_range 0.02).
type CrossEncoder struct {
	Cfg     EncoderConfig
	Encoder *Tower // prefix "encoder"

	head []*Param // pooler.weight, pooler.bias, classifier.weight, classifier.bias
	rng  *RNG
}

// Names of the cross-encoder's head parameters: BERT's pooler, then the
// classifier.
const (
	PoolerWeight     = "pooler.weight"
	PoolerBias       = "pooler.bias"
	ClassifierWeight = "classifier.weight"
	ClassifierBias   = "classifier.bias"
)

// HFCrossEncoderName maps a cross-encoder parameter name to its Hugging Face
// BertForSequenceClassification state-dict name: "bert." + HFBertName for the
// encoder's, bert.pooler.dense.* for the pooler, classifier.* for the
// classifier. No tensor needs a transpose. It fails on any other name.
func HFCrossEncoderName(name string) (string, error) {
	switch name {
	case PoolerWeight:
		return "bert.pooler.dense.weight", nil
	case PoolerBias:
		return "bert.pooler.dense.bias", nil
	case ClassifierWeight, ClassifierBias:
		return name, nil
	}
	if !strings.HasPrefix(name, PrefixShared+".") {
		return "", fmt.Errorf("model: parameter %q is not a cross-encoder parameter", name)
	}
	hf, err := HFBertName(name)
	if err != nil {
		return "", err
	}
	return "bert." + hf, nil
}

// NewCrossEncoder validates cfg, which must describe a transformer (the bow
// encoder averages its tokens and has no token types, so it cannot tell the
// query from the passage), and initialises float32 parameters from seed: the
// encoder's draws first, as NewBiEncoder's shared tower, then the pooler's,
// then the classifier's.
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
	pw := newParam(PoolerWeight, dt, cfg.Hidden, cfg.Hidden)
	pw.normal(r, 0.02)
	pb := newParam(PoolerBias, dt, cfg.Hidden)
	pb.constant(0)
	w := newParam(ClassifierWeight, dt, 1, cfg.Hidden)
	w.normal(r, 0.02)
	b := newParam(ClassifierBias, dt, 1)
	b.constant(0)
	m.head = []*Param{pw, pb, w, b}
	if err := checkUnique(m.Params()); err != nil {
		return nil, err
	}
	return m, nil
}

// InitMatching makes the initial cross-encoder attend from a token to the other
// occurrences of its word piece, a prior for learning term matching from few
// judged queries: it multiplies the word embeddings by wordScale (so that,
// after the embedding LayerNorm, a token's word dominates its position and
// segment: with the N(0, 0.02²) draws of all three, wordScale = 4 gives the
// word 16/18 of the variance) and adds gain·I to the query and key
// projections of the first layer (their random draws stay, breaking
// symmetry), so that the attention logit of tokens i and j starts near
// gain²·⟨x_i, x_j⟩/√(H/heads) on each head's slice: large for two occurrences
// of one word piece. A query term then attends to its occurrences in the
// passage and takes on their segment embedding, an overlap signal that
// training can build on (on Cranfield it pays off together with cropping-list
// pretraining, see recipes/reranker-cranfield.toml; alone it made no
// measurable difference). gain 0 and wordScale 1 leave the model unchanged.
// It fails for a negative gain or a wordScale <= 0.
func (m *CrossEncoder) InitMatching(gain, wordScale float64) error {
	if !(gain >= 0) || !(wordScale > 0) || math.IsInf(gain, 0) || math.IsInf(wordScale, 0) {
		return fmt.Errorf("model: cross-encoder: matching gain %v and word scale %v, want gain >= 0 and scale > 0", gain, wordScale)
	}
	scale := func(p *Param, f func(i int, v float64) float64) {
		switch d := p.Value.Data().(type) {
		case []float32:
			for i, v := range d {
				d[i] = float32(f(i, float64(v)))
			}
		case []float64:
			for i, v := range d {
				d[i] = f(i, v)
			}
		}
	}
	if wordScale != 1 {
		scale(m.Param(PrefixShared+".embeddings.word"), func(_ int, v float64) float64 { return v * wordScale })
	}
	if gain == 0 {
		return nil
	}
	h := m.Cfg.Hidden
	for _, name := range []string{"attn.q.weight", "attn.k.weight"} {
		scale(m.Param(PrefixShared+".layer.0."+name), func(i int, v float64) float64 {
			if i/h == i%h {
				return v + gain
			}
			return v
		})
	}
	return nil
}

// Params returns the parameters, each once, in a fixed order: the encoder's,
// then pooler.weight, pooler.bias, classifier.weight and classifier.bias.
func (m *CrossEncoder) Params() []*Param {
	return append(m.Encoder.Params(), m.head...)
}

// Param returns the parameter of that checkpoint name, or nil.
func (m *CrossEncoder) Param(name string) *Param { return paramNamed(m.Params(), name) }

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
	u, err := Linear(x, b.Node(m.head[0]), b.Node(m.head[1])) // [B,H]
	if err != nil {
		return nil, err
	}
	if u, err = gorgonia.Tanh(u); err != nil {
		return nil, fmt.Errorf("model: cross-encoder pooler: %w", err)
	}
	if u, err = m.Encoder.dropout(u, train); err != nil {
		return nil, err
	}
	s, err := Linear(u, b.Node(m.head[2]), b.Node(m.head[3])) // [B,1]
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
