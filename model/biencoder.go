package model

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Tower prefixes of parameter names.
const (
	PrefixShared  = "encoder" // both towers, when shared
	PrefixQuery   = "query"
	PrefixPassage = "passage"
)

// BiEncoder is a dual encoder (Karpukhin et al., 2020, DPR): a query tower
// and a passage tower, each mapping a token batch to one vector per
// sequence; relevance is a similarity of the two vectors (the losses package).
// With Shared, Query and Passage are the same *Tower.
type BiEncoder struct {
	Cfg            EncoderConfig
	Shared         bool
	Query, Passage *Tower

	rng *RNG
}

// Tower is one encoder: its parameters and how to build its graph.
type Tower struct {
	Prefix string // "encoder", "query" or "passage"
	Cfg    EncoderConfig

	params []*Param
	byName map[string]*Param // by name without the prefix
	rng    *RNG
	dt     tensor.Dtype

	unfusedAttention bool // build attention from the separate ops (tests compare)
	unfusedNormGELU  bool // build Add + LayerNorm and Linear + GELU as separate ops (tests compare)
	// attnProbs, while set (Reader.BuildLogProbsAttention), collects every layer's attention
	// probabilities [B,heads,L,L] of an inference graph.
	attnProbs *[]*gorgonia.Node
	// ffnIn, while set (Reader.BuildStatesKeys), collects every GPT-2 layer's FFN input
	// LayerNorm₂(a) [B*L,H] of an inference graph.
	ffnIn *[]*gorgonia.Node
}

// NewBiEncoder validates cfg and initialises the towers' float32 parameters
// from seed (a PCG stream; see the encoder files for the initialisation).
// Separate towers get independent draws, query tower first. Dropout masks
// come from a PCG seeded with seed until SetRNG replaces it.
func NewBiEncoder(cfg EncoderConfig, shared bool, seed uint64) (*BiEncoder, error) {
	return newBiEncoder(cfg, shared, seed, tensor.Float32)
}

// NewBiEncoderOf is NewBiEncoder with parameters of dtype dt (tensor.Float32 or tensor.Float64):
// float64 models let gradient tests compare two computations at 1e-6.
func NewBiEncoderOf(cfg EncoderConfig, shared bool, seed uint64, dt tensor.Dtype) (*BiEncoder, error) {
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("model: bi-encoder of dtype %v, want float32 or float64", dt)
	}
	return newBiEncoder(cfg, shared, seed, dt)
}

// Stream constants of the model's PCG generators.
const (
	streamInit    = 0x6d6f64656c696e69 // "modelini"
	streamDropout = 0x6d6f64656c64726f // "modeldro"
)

func newBiEncoder(cfg EncoderConfig, shared bool, seed uint64, dt tensor.Dtype) (*BiEncoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &BiEncoder{Cfg: cfg, Shared: shared, rng: &RNG{R: rand.New(rand.NewPCG(seed, streamDropout))}}
	r := rand.New(rand.NewPCG(seed, streamInit))
	if shared {
		m.Query = newTower(PrefixShared, cfg, r, m.rng, dt)
		m.Passage = m.Query
	} else {
		m.Query = newTower(PrefixQuery, cfg, r, m.rng, dt)
		m.Passage = newTower(PrefixPassage, cfg, r, m.rng, dt)
	}
	if err := checkUnique(m.Params()); err != nil {
		return nil, err
	}
	return m, nil
}

func newTower(prefix string, cfg EncoderConfig, r *rand.Rand, rng *RNG, dt tensor.Dtype) *Tower {
	t := &Tower{Prefix: prefix, Cfg: cfg, byName: map[string]*Param{}, rng: rng, dt: dt}
	switch cfg.Encoder {
	case EncoderBow:
		t.initBow(r)
	case EncoderTransformer:
		t.initTransformer(r)
	}
	return t
}

// param creates the parameter prefix.name.
func (t *Tower) param(name string, shape ...int) *Param {
	p := newParam(t.Prefix+"."+name, t.dt, shape...)
	t.params = append(t.params, p)
	t.byName[name] = p
	return p
}

// Params returns the model's parameters, each once, in a fixed order: the
// query tower's (or the shared tower's), then the passage tower's.
func (m *BiEncoder) Params() []*Param {
	ps := m.Query.Params()
	if !m.Shared {
		ps = append(ps, m.Passage.Params()...)
	}
	return ps
}

// Param returns the parameter of that checkpoint name, or nil.
func (m *BiEncoder) Param(name string) *Param { return paramNamed(m.Params(), name) }

// SetRNG makes dropout draw its masks from r, in every graph built from this
// model (the trainer reseeds it each step for reproducible runs).
func (m *BiEncoder) SetRNG(r *rand.Rand) { m.rng.R = r }

// Params returns the tower's parameters in creation order.
func (t *Tower) Params() []*Param { return append([]*Param(nil), t.params...) }

// Dtype is the dtype of the tower's parameters and outputs.
func (t *Tower) Dtype() tensor.Dtype { return t.dt }

// Dim is the width H of the tower's output vectors.
func (t *Tower) Dim() int { return t.Cfg.Hidden }

// Build adds the tower to the binder's graph for the batch in and returns
// the pooled sequence vectors [B,H]. With train, dropout is active (masks
// from the model's RNG); without, the graph is deterministic.
func (t *Tower) Build(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	x, err := t.BuildTokens(b, in, train)
	if err != nil {
		return nil, err
	}
	if t.Cfg.Encoder == EncoderBow {
		return t.poolBow(b, x, in, train)
	}
	if t.Cfg.pooling() == PoolingCLS {
		return FirstToken(x, in.L)
	}
	return MeanPool(x, in.Mask)
}

// BuildTokens is Build without the pooling: it returns one vector per token,
// [B*L,H] (sequence b at rows b*L..b*L+L-1). For bow these are the word
// embeddings.
func (t *Tower) BuildTokens(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	if in.Mask.Dtype() != t.dt {
		return nil, fmt.Errorf("model: tower %s: inputs mask is %v, parameters are %v", t.Prefix, in.Mask.Dtype(), t.dt)
	}
	if t.Cfg.Encoder == EncoderBow {
		return Gather(t.node(b, "embeddings.word"), in.IDs)
	}
	return t.transformerTokens(b, in, train)
}

// node binds the parameter prefix.name.
func (t *Tower) node(b *Binder, name string) *gorgonia.Node {
	p, ok := t.byName[name]
	if !ok {
		panic(fmt.Sprintf("model: tower %s has no parameter %q", t.Prefix, name))
	}
	return b.Node(p)
}

func (t *Tower) dropout(x *gorgonia.Node, train bool) (*gorgonia.Node, error) {
	if !train {
		return x, nil
	}
	return Dropout(x, t.Cfg.Dropout, t.rng)
}

// The bow encoder: the masked mean of the token embeddings, then a linear
// layer H -> H. Dropout (when training) applies to the mean.
//
//	name (prefix "encoder." when shared)   shape   init
//	<prefix>.embeddings.word                [V,H]   N(0, 0.02²) (BERT)
//	<prefix>.proj.weight                    [H,H]   Xavier uniform; [out,in] as torch.nn.Linear
//	<prefix>.proj.bias                      [H]     0

func (t *Tower) initBow(r *rand.Rand) {
	c := t.Cfg
	t.param("embeddings.word", c.Vocab, c.Hidden).normal(r, 0.02)
	t.param("proj.weight", c.Hidden, c.Hidden).xavier(r)
	t.param("proj.bias", c.Hidden).constant(0)
}

func (t *Tower) poolBow(b *Binder, x *gorgonia.Node, in *Inputs, train bool) (*gorgonia.Node, error) {
	x, err := MeanPool(x, in.Mask)
	if err != nil {
		return nil, err
	}
	if x, err = t.dropout(x, train); err != nil {
		return nil, err
	}
	return Linear(x, t.node(b, "proj.weight"), t.node(b, "proj.bias"))
}
