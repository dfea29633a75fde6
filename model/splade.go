package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
)

// Splade is a SPLADE encoder (Formal et al., 2021; SPLADE v2 / SPLADE++ max pooling): a BERT
// tower, BERT's masked-language-model head over its tokens, and SpladeMax over the sequence:
//
//	t   = LayerNorm(GELU(x·Wtᵀ + bt))            [B*L,H]   x: the tower's tokens
//	w_b = max_l log(1 + ReLU(t_l·Eᵀ + bias))     [B,V]     E: the tower's word embeddings
//
// The decoder is tied to the tower's word embeddings [V,H] (BertForMaskedLM's
// tie_word_embeddings), so it is not a parameter of its own. all-MiniLM-L6-v2 ships no MLM head:
// NewSplade initialises the transform to the identity dense layer (Wt = I, bt = 0), a unit
// LayerNorm (weight 1, bias 0) and every decoder bias to biasInit, so the model before training
// scores term v by the word embedding's dot product with LayerNorm(GELU(x)) minus a threshold.
// With all-MiniLM-L6-v2 a token's largest such logit is most often its own id (median rank 0 on
// 8 SciFact passages), and a threshold of about 5 keeps ~0.01% of a token's logits (~300 terms
// per passage of 128 tokens), so the untrained model is a sparse bag of words with expansion.
//
//	name                          shape    Hugging Face BertForMaskedLM
//	mlm.transform.dense.weight    [H,H]    cls.predictions.transform.dense.weight
//	mlm.transform.dense.bias      [H]      cls.predictions.transform.dense.bias
//	mlm.transform.norm.weight     [H]      cls.predictions.transform.LayerNorm.weight
//	mlm.transform.norm.bias       [H]      cls.predictions.transform.LayerNorm.bias
//	mlm.decoder.bias              [V]      cls.predictions.bias (= cls.predictions.decoder.bias)
//
// One tower encodes queries and passages (SPLADE's shared encoder).
type Splade struct {
	Tower *Tower
	head  []*Param
	by    map[string]*Param
}

// SpladeParamNames maps the head's parameter names to Hugging Face BertForMaskedLM's.
var SpladeParamNames = map[string]string{
	"mlm.transform.dense.weight": "cls.predictions.transform.dense.weight",
	"mlm.transform.dense.bias":   "cls.predictions.transform.dense.bias",
	"mlm.transform.norm.weight":  "cls.predictions.transform.LayerNorm.weight",
	"mlm.transform.norm.bias":    "cls.predictions.transform.LayerNorm.bias",
	"mlm.decoder.bias":           "cls.predictions.bias",
}

// NewSplade returns a SPLADE encoder over a transformer tower t (its parameters are shared, not
// copied), the head initialised as the type's comment says (the decoder biases to biasInit).
func NewSplade(t *Tower, biasInit float64) (*Splade, error) {
	if t.Cfg.Encoder != EncoderTransformer || t.Cfg.Arch == ArchGPT2 {
		return nil, fmt.Errorf("model: SPLADE needs a BERT transformer tower, got encoder %q arch %q", t.Cfg.Encoder, t.Cfg.Arch)
	}
	s := &Splade{Tower: t, by: map[string]*Param{}}
	h, v := t.Cfg.Hidden, t.Cfg.Vocab
	add := func(name string, shape ...int) *Param {
		p := newParam(name, t.dt, shape...)
		s.head = append(s.head, p)
		s.by[name] = p
		return p
	}
	w := add("mlm.transform.dense.weight", h, h)
	i := 0
	w.fill(func() float64 { // the identity, row-major
		d := i/h == i%h
		i++
		if d {
			return 1
		}
		return 0
	})
	add("mlm.transform.dense.bias", h)
	add("mlm.transform.norm.weight", h).constant(1)
	add("mlm.transform.norm.bias", h)
	add("mlm.decoder.bias", v).constant(biasInit)
	return s, nil
}

// Dim is V, the width of the sparse vectors.
func (s *Splade) Dim() int { return s.Tower.Cfg.Vocab }

// Params returns the tower's parameters then the head's, in a fixed order.
func (s *Splade) Params() []*Param { return append(s.Tower.Params(), s.head...) }

// HeadParams returns the head's parameters (the table of Splade).
func (s *Splade) HeadParams() []*Param { return append([]*Param(nil), s.head...) }

// Build adds the encoder to b's graph for the batch in and returns the term weights [B,V]
// (dropout in the tower when train).
func (s *Splade) Build(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	x, err := s.Tower.BuildTokens(b, in, train)
	if err != nil {
		return nil, err
	}
	if x, err = Linear(x, b.Node(s.by["mlm.transform.dense.weight"]), b.Node(s.by["mlm.transform.dense.bias"])); err != nil {
		return nil, err
	}
	if x, err = GELU(x); err != nil {
		return nil, err
	}
	if x, err = LayerNorm(x, b.Node(s.by["mlm.transform.norm.weight"]), b.Node(s.by["mlm.transform.norm.bias"]), LayerNormEps); err != nil {
		return nil, err
	}
	return SpladeMax(x, s.Tower.node(b, "embeddings.word"), b.Node(s.by["mlm.decoder.bias"]), in.Mask)
}

// SpladeRunner encodes sequences into SPLADE term weights for inference, B x L at a time (no
// dropout). Not safe for concurrent use.
type SpladeRunner struct{ *batchRunner }

// NewSpladeRunner builds the inference graph of s for batches of B sequences of L tokens.
func NewSpladeRunner(s *Splade, B, L int) (*SpladeRunner, error) {
	r, err := newBatchRunner(B, L, s.Dim(), "splade.encode", s.Tower.dt, func(b *Binder, in *Inputs) (*gorgonia.Node, error) {
		return s.Build(b, in, false)
	})
	if err != nil {
		return nil, err
	}
	return &SpladeRunner{r}, nil
}

// Encode returns the n x V term weights of n sequences of L tokens (ids and mask row-major, n*L
// values each; types nil: all 0).
func (r *SpladeRunner) Encode(ids []int, mask []float32, n int) ([]float32, error) {
	if n < 0 || len(ids) != n*r.l || len(mask) != n*r.l {
		return nil, fmt.Errorf("model: splade encode: %d sequences of length %d need %d ids and mask values; got %d, %d", n, r.l, n*r.l, len(ids), len(mask))
	}
	return r.run(ids, mask, nil, n, "splade encode")
}
