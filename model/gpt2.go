package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Architectures of the transformer encoder (EncoderConfig.Arch).
const (
	ArchBERT = "bert" // post-LN blocks, embedding LayerNorm, token types (transformer.go); "" means "bert"
	ArchGPT2 = "gpt2" // pre-LN blocks, final LayerNorm, no token types (this file); causal only
)

// GPT2LayerNormEps is GPT-2's layer_norm_epsilon (transformers.GPT2Config's default).
const GPT2LayerNormEps = 1e-5

// The GPT-2 architecture (Radford et al. 2019, "Language Models are Unsupervised Multitask
// Learners", section 2.3; transformers' GPT2Model): word + position embeddings (no token types,
// no embedding LayerNorm), dropout, then Layers pre-LN blocks
//
//	a = x + Dropout(Attention(LayerNorm₁(x))·Woᵀ + bo)
//	x = a + Dropout(GELU(LayerNorm₂(a)·W1ᵀ + b1)·W2ᵀ + b2)
//
// and a final LayerNorm on the last block's output. Attention is the causal masked multi-head
// attention of the BERT blocks (attention dropout included); GELU is the exact erf GELU
// (transformers' activation_function "gelu", not GPT-2's default tanh "gelu_new"); every
// LayerNorm uses eps GPT2LayerNormEps.
//
// Parameters (after the tower prefix; linear weights [out,in] like torch.nn.Linear, which is
// the transpose of GPT-2's Conv1D [in,out]; the export package fuses q, k, v into c_attn):
//
//	ours                          shape      GPT2LMHeadModel
//	embeddings.word               [V,H]      transformer.wte.weight (and the tied lm_head.weight)
//	embeddings.position           [P,H]      transformer.wpe.weight
//	layer.N.ln_1.weight|bias      [H]        transformer.h.N.ln_1.weight|bias
//	layer.N.attn.q|k|v.weight     [H,H]      transformer.h.N.attn.c_attn.weight [H,3H], columns q|k|v, transposed
//	layer.N.attn.q|k|v.bias       [H]        transformer.h.N.attn.c_attn.bias [3H]
//	layer.N.attn.out.weight|bias  [H,H]|[H]  transformer.h.N.attn.c_proj.weight (transposed)|bias
//	layer.N.ln_2.weight|bias      [H]        transformer.h.N.ln_2.weight|bias
//	layer.N.ffn.in.weight|bias    [F,H]|[F]  transformer.h.N.mlp.c_fc.weight [H,F] (transposed)|bias
//	layer.N.ffn.out.weight|bias   [H,F]|[H]  transformer.h.N.mlp.c_proj.weight [F,H] (transposed)|bias
//	ln_f.weight|bias              [H]        transformer.ln_f.weight|bias
//
// Initialisation is GPT-2's (transformers' GPT2PreTrainedModel._init_weights): weights and
// embeddings N(0, 0.02²), the two residual output projections (attn.out, ffn.out) N(0,
// (0.02/√(2·Layers))²), biases 0, LayerNorm weight 1 and bias 0.

func (t *Tower) initGPT2(r *rand.Rand) {
	c := t.Cfg
	const std = 0.02
	residual := std / math.Sqrt(2*float64(c.Layers))
	t.param("embeddings.word", c.Vocab, c.Hidden).normal(r, std)
	t.param("embeddings.position", c.MaxPosition, c.Hidden).normal(r, std)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("layer.%d.", i)
		t.layerNormParams(p+"ln_1", c.Hidden)
		t.linearParams(r, p+"attn.q", c.Hidden, c.Hidden)
		t.linearParams(r, p+"attn.k", c.Hidden, c.Hidden)
		t.linearParams(r, p+"attn.v", c.Hidden, c.Hidden)
		t.param(p+"attn.out.weight", c.Hidden, c.Hidden).normal(r, residual)
		t.param(p+"attn.out.bias", c.Hidden).constant(0)
		t.layerNormParams(p+"ln_2", c.Hidden)
		t.linearParams(r, p+"ffn.in", c.FFN, c.Hidden)
		t.param(p+"ffn.out.weight", c.Hidden, c.FFN).normal(r, residual)
		t.param(p+"ffn.out.bias", c.Hidden).constant(0)
	}
	t.layerNormParams("ln_f", c.Hidden)
}

func (t *Tower) gpt2LayerNorm(b *Binder, x *gorgonia.Node, name string) (*gorgonia.Node, error) {
	return LayerNorm(x, t.node(b, name+".weight"), t.node(b, name+".bias"), GPT2LayerNormEps)
}

// gpt2Tokens returns the final-LayerNorm token states [B*L,H] of the GPT-2 tower.
func (t *Tower) gpt2Tokens(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	c := t.Cfg
	if in.L > c.MaxPosition {
		return nil, fmt.Errorf("model: tower %s: sequence length %d exceeds max_position = %d", t.Prefix, in.L, c.MaxPosition)
	}
	x, err := EmbedWordPosition(t.node(b, "embeddings.word"), t.node(b, "embeddings.position"), in.IDs, in.L)
	if err != nil {
		return nil, err
	}
	if x, err = t.dropout(x, train); err != nil {
		return nil, err
	}
	for i := 0; i < c.Layers; i++ {
		if x, err = t.gpt2Block(b, in, x, fmt.Sprintf("layer.%d.", i), train); err != nil {
			return nil, fmt.Errorf("model: tower %s layer %d: %w", t.Prefix, i, err)
		}
	}
	return t.gpt2LayerNorm(b, x, "ln_f")
}

// gpt2Block is one pre-LN GPT-2 layer on x [B*L,H] (crossBlock without the cross sublayer).
func (t *Tower) gpt2Block(b *Binder, in *Inputs, x *gorgonia.Node, p string, train bool) (*gorgonia.Node, error) {
	return t.crossBlock(b, in, x, p, train, nil)
}

// EmbedWordPosition sums GPT-2's two input embeddings:
//
//	out[b*L+l] = word[ids[b*L+l]] + pos[l]
//
// word is [V,H], pos [P,H] with P >= L; ids is an int tensor of N = B*L ids (row-major,
// sequence b at rows b*L..b*L+L-1), each in [0,V). The result is [N,H]. Gradients flow to word
// and pos (scatter-adds), as in Embed.
func EmbedWordPosition(word, pos, ids *gorgonia.Node, L int) (*gorgonia.Node, error) {
	return apply(embedWPK{l: L}, word, pos, ids)
}

type embedWPK struct{ l int }

func (k embedWPK) name() string { return fmt.Sprintf("EmbedWordPosition{L=%d}", k.l) }
func (embedWPK) typ() hm.Type   { return fnType(ft(2), ft(2), it(1), ft(2)) }
func (embedWPK) diff() []bool   { return []bool{true, true, false} }
func (k embedWPK) grads(in []tensor.Shape) []*gradTerm {
	return []*gradTerm{
		{k: scatterK{rows: in[0][0]}, args: []int{2, argGrad}},
		{k: posGradK{rows: in[1][0], l: k.l}, args: []int{argGrad}},
		nil,
	}
}

func (k embedWPK) shape(in []tensor.Shape) (tensor.Shape, error) {
	for i := 0; i < 2; i++ {
		if err := want2D(k.name(), i, in[i]); err != nil {
			return nil, err
		}
	}
	h := in[0][1]
	if in[1][1] != h {
		return nil, fmt.Errorf("model: %s: embedding widths differ: word %v, position %v", k.name(), in[0], in[1])
	}
	if k.l > in[1][0] {
		return nil, fmt.Errorf("model: %s: sequence length %d exceeds the %d position embeddings", k.name(), k.l, in[1][0])
	}
	if err := wantVec(k.name(), 2, in[2], -1); err != nil {
		return nil, err
	}
	n := in[2][0]
	if k.l <= 0 || n%k.l != 0 {
		return nil, fmt.Errorf("model: %s: %d ids do not split into sequences of length %d", k.name(), n, k.l)
	}
	return tensor.Shape{n, h}, nil
}

func (k embedWPK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	ids, err := ints(k.name(), in[2])
	if err != nil {
		return err
	}
	if err := checkIDs(k.name()+" word", ids, in[0].Shape()[0]); err != nil {
		return err
	}
	h := in[0].Shape()[1]
	switch o := out.Data().(type) {
	case []float32:
		embedWPRows(o, data[float32](in[0]), data[float32](in[1]), ids, k.l, h)
	case []float64:
		embedWPRows(o, data[float64](in[0]), data[float64](in[1]), ids, k.l, h)
	}
	return nil
}

func embedWPRows[T float](out, word, pos []T, ids []int, l, h int) {
	for i, id := range ids {
		o := out[i*h : (i+1)*h]
		w := word[id*h : (id+1)*h]
		p := pos[(i%l)*h : (i%l+1)*h]
		for j := range o {
			o[j] = w[j] + p[j]
		}
	}
}
