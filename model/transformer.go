package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"gorgonia.org/gorgonia"
)

// The transformer encoder is BERT's (Devlin et al., 2019): word + position +
// token-type embeddings, LayerNorm, dropout, then Layers post-LN blocks
//
//	a = LayerNorm(x + Dropout(Attention(x)·Woᵀ + bo))
//	x = LayerNorm(a + Dropout(GELU(a·W1ᵀ + b1)·W2ᵀ + b2))
//
// where Attention is multi-head scaled dot-product self-attention whose
// weights exclude padding keys (and future keys when Causal) and pass through
// dropout. The output is pooled by masked mean or by the first token; there
// is no projection after pooling.
//
// Parameters (prefix "encoder" when shared, else "query"/"passage"), all
// initialised as BERT (initializer_range 0.02): weights and embeddings
// N(0, 0.02²), biases 0, LayerNorm weight 1 and bias 0. Linear weights are
// stored [out,in] like torch.nn.Linear, so they export to Hugging Face
// BertModel without a transpose (HFBertName gives the name):
//
//	ours (after the prefix)          shape    Hugging Face BertModel
//	embeddings.word                  [V,H]    embeddings.word_embeddings.weight
//	embeddings.position              [P,H]    embeddings.position_embeddings.weight
//	embeddings.type                  [2,H]    embeddings.token_type_embeddings.weight
//	embeddings.norm.weight|bias      [H]      embeddings.LayerNorm.weight|bias
//	layer.N.attn.q.weight|bias       [H,H]|[H] encoder.layer.N.attention.self.query.weight|bias
//	layer.N.attn.k.weight|bias       [H,H]|[H] encoder.layer.N.attention.self.key.weight|bias
//	layer.N.attn.v.weight|bias       [H,H]|[H] encoder.layer.N.attention.self.value.weight|bias
//	layer.N.attn.out.weight|bias     [H,H]|[H] encoder.layer.N.attention.output.dense.weight|bias
//	layer.N.attn.norm.weight|bias    [H]      encoder.layer.N.attention.output.LayerNorm.weight|bias
//	layer.N.ffn.in.weight|bias       [F,H]|[F] encoder.layer.N.intermediate.dense.weight|bias
//	layer.N.ffn.out.weight|bias      [H,F]|[H] encoder.layer.N.output.dense.weight|bias
//	layer.N.ffn.norm.weight|bias     [H]      encoder.layer.N.output.LayerNorm.weight|bias
//
// (P = MaxPosition, F = FFN.) BERT's pooler (dense + tanh on [CLS]) is not
// part of this encoder. With EncoderConfig.Arch = "gpt2" the tower is GPT-2's
// instead (gpt2.go), the architecture of the Reader.

var hfBertLayerNames = map[string]string{
	"attn.q":    "attention.self.query",
	"attn.k":    "attention.self.key",
	"attn.v":    "attention.self.value",
	"attn.out":  "attention.output.dense",
	"attn.norm": "attention.output.LayerNorm",
	"ffn.in":    "intermediate.dense",
	"ffn.out":   "output.dense",
	"ffn.norm":  "output.LayerNorm",
}

// HFBertName maps a transformer parameter name (with its tower prefix) to
// the Hugging Face BertModel state-dict name; the tensor needs no transpose.
// It fails on names that are not transformer parameters (e.g. bow ones).
func HFBertName(name string) (string, error) {
	_, rest, _ := strings.Cut(name, ".")
	switch rest {
	case "embeddings.word":
		return "embeddings.word_embeddings.weight", nil
	case "embeddings.position":
		return "embeddings.position_embeddings.weight", nil
	case "embeddings.type":
		return "embeddings.token_type_embeddings.weight", nil
	case "embeddings.norm.weight", "embeddings.norm.bias":
		return "embeddings.LayerNorm." + strings.TrimPrefix(rest, "embeddings.norm."), nil
	}
	parts := strings.Split(rest, ".")
	if len(parts) == 5 && parts[0] == "layer" && (parts[4] == "weight" || parts[4] == "bias") {
		if _, err := strconv.Atoi(parts[1]); err == nil {
			if hf, ok := hfBertLayerNames[parts[2]+"."+parts[3]]; ok {
				return "encoder.layer." + parts[1] + "." + hf + "." + parts[4], nil
			}
		}
	}
	return "", fmt.Errorf("model: parameter %q has no Hugging Face BertModel name", name)
}

func (t *Tower) initTransformer(r *rand.Rand) {
	c := t.Cfg
	if c.Arch == ArchGPT2 {
		t.initGPT2(r)
		return
	}
	const std = 0.02
	t.param("embeddings.word", c.Vocab, c.Hidden).normal(r, std)
	t.param("embeddings.position", c.MaxPosition, c.Hidden).normal(r, std)
	t.param("embeddings.type", TypeVocab, c.Hidden).normal(r, std)
	t.layerNormParams("embeddings.norm", c.Hidden)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("layer.%d.", i)
		t.linearParams(r, p+"attn.q", c.Hidden, c.Hidden)
		t.linearParams(r, p+"attn.k", c.Hidden, c.Hidden)
		t.linearParams(r, p+"attn.v", c.Hidden, c.Hidden)
		t.linearParams(r, p+"attn.out", c.Hidden, c.Hidden)
		t.layerNormParams(p+"attn.norm", c.Hidden)
		t.linearParams(r, p+"ffn.in", c.FFN, c.Hidden)
		t.linearParams(r, p+"ffn.out", c.Hidden, c.FFN)
		t.layerNormParams(p+"ffn.norm", c.Hidden)
	}
}

func (t *Tower) linearParams(r *rand.Rand, name string, out, in int) {
	t.param(name+".weight", out, in).normal(r, 0.02)
	t.param(name+".bias", out).constant(0)
}

func (t *Tower) layerNormParams(name string, h int) {
	t.param(name+".weight", h).constant(1)
	t.param(name+".bias", h).constant(0)
}

func (t *Tower) linear(b *Binder, x *gorgonia.Node, name string) (*gorgonia.Node, error) {
	return Linear(x, t.node(b, name+".weight"), t.node(b, name+".bias"))
}

func (t *Tower) layerNorm(b *Binder, x *gorgonia.Node, name string) (*gorgonia.Node, error) {
	return LayerNorm(x, t.node(b, name+".weight"), t.node(b, name+".bias"), LayerNormEps)
}

func (t *Tower) transformerTokens(b *Binder, in *Inputs, train bool) (*gorgonia.Node, error) {
	c := t.Cfg
	if c.Arch == ArchGPT2 {
		return t.gpt2Tokens(b, in, train)
	}
	if in.L > c.MaxPosition {
		return nil, fmt.Errorf("model: tower %s: sequence length %d exceeds max_position = %d", t.Prefix, in.L, c.MaxPosition)
	}
	x, err := Embed(t.node(b, "embeddings.word"), t.node(b, "embeddings.position"), t.node(b, "embeddings.type"), in.IDs, in.Types, in.L)
	if err != nil {
		return nil, err
	}
	if x, err = t.layerNorm(b, x, "embeddings.norm"); err != nil {
		return nil, err
	}
	if x, err = t.dropout(x, train); err != nil {
		return nil, err
	}
	for i := 0; i < c.Layers; i++ {
		if x, err = t.block(b, in, x, fmt.Sprintf("layer.%d.", i), train); err != nil {
			return nil, fmt.Errorf("model: tower %s layer %d: %w", t.Prefix, i, err)
		}
	}
	return x, nil
}

// block is one post-LN transformer layer on x [B*L,H].
func (t *Tower) block(b *Binder, in *Inputs, x *gorgonia.Node, p string, train bool) (*gorgonia.Node, error) {
	a, err := t.selfAttention(b, in, x, p, train)
	if err != nil {
		return nil, err
	}
	if a, err = t.addLayerNorm(b, x, a, p+"attn.norm"); err != nil {
		return nil, err
	}
	h, err := t.feedForward(b, a, p, train)
	if err != nil {
		return nil, err
	}
	return t.addLayerNorm(b, a, h, p+"ffn.norm")
}

// addLayerNorm is the residual connection and LayerNorm name of a post-LN block,
// LayerNorm(x + r): the fused AddLayerNorm, or with t.unfusedNormGELU (tests) Add then
// LayerNorm, which compute the same bits.
func (t *Tower) addLayerNorm(b *Binder, x, r *gorgonia.Node, name string) (*gorgonia.Node, error) {
	if t.unfusedNormGELU {
		s, err := Add(x, r)
		if err != nil {
			return nil, err
		}
		return t.layerNorm(b, s, name)
	}
	return AddLayerNorm(x, r, t.node(b, name+".weight"), t.node(b, name+".bias"), LayerNormEps)
}

// selfAttention is the multi-head self-attention sublayer of layer p on h [B*L,H], before the
// residual: dropout(W_o · softmax(q kᵀ / sqrt(d_head), masked) · v), the attention
// probabilities also dropped out in training. The attention is the fused Attention op, or
// with t.unfusedAttention (tests) the four ops it replaces, which compute the same bits.
func (t *Tower) selfAttention(b *Binder, in *Inputs, h *gorgonia.Node, p string, train bool) (*gorgonia.Node, error) {
	c := t.Cfg
	var err error
	var q, k, v, a *gorgonia.Node
	if q, err = t.linear(b, h, p+"attn.q"); err != nil {
		return nil, err
	}
	if k, err = t.linear(b, h, p+"attn.k"); err != nil {
		return nil, err
	}
	if v, err = t.linear(b, h, p+"attn.v"); err != nil {
		return nil, err
	}
	o := AttentionOptions{L: in.L, Heads: c.Heads, Scale: 1 / math.Sqrt(float64(c.Hidden/c.Heads)), Causal: c.Causal}
	if train {
		o.Dropout, o.RNG = c.Dropout, t.rng
	}
	switch {
	case t.attnProbs != nil && !train:
		// The separate ops, to keep the probabilities: the same bits as the fused op.
		var p *gorgonia.Node
		if p, err = AttentionScores(q, k, o.L, o.Heads, o.Scale); err != nil {
			return nil, err
		}
		if p, err = MaskedSoftmax(p, in.Mask, o.Causal); err != nil {
			return nil, err
		}
		*t.attnProbs = append(*t.attnProbs, p)
		a, err = AttentionContext(p, v, o.L, o.Heads)
	case t.unfusedAttention:
		a, err = unfusedAttention(q, k, v, in.Mask, o)
	default:
		a, err = Attention(q, k, v, in.Mask, o)
	}
	if err != nil {
		return nil, err
	}
	if a, err = t.linear(b, a, p+"attn.out"); err != nil {
		return nil, err
	}
	return t.dropout(a, train)
}

// unfusedAttention is Attention built from AttentionScores, MaskedSoftmax,
// Dropout and AttentionContext, holding [B,heads,L,L] tensors.
func unfusedAttention(q, k, v, mask *gorgonia.Node, o AttentionOptions) (*gorgonia.Node, error) {
	s, err := AttentionScores(q, k, o.L, o.Heads, o.Scale)
	if err != nil {
		return nil, err
	}
	if s, err = MaskedSoftmax(s, mask, o.Causal); err != nil {
		return nil, err
	}
	if s, err = Dropout(s, o.Dropout, o.RNG); err != nil {
		return nil, err
	}
	return AttentionContext(s, v, o.L, o.Heads)
}

// feedForward is the position-wise sublayer of layer p on h [B*L,H], before the residual:
// dropout(W_out · GELU(W_in · h)). Inference graphs take GELU(W_in · h) as one op, LinearGELU,
// which holds no pre-activation; training graphs keep Linear and GELU apart (the gradient then
// reads the stored pre-activation instead of recomputing it), as does t.unfusedNormGELU.
func (t *Tower) feedForward(b *Binder, h *gorgonia.Node, p string, train bool) (*gorgonia.Node, error) {
	var err error
	if !train && !t.unfusedNormGELU {
		h, err = LinearGELU(h, t.node(b, p+"ffn.in.weight"), t.node(b, p+"ffn.in.bias"))
	} else if h, err = t.linear(b, h, p+"ffn.in"); err == nil {
		h, err = GELU(h)
	}
	if err != nil {
		return nil, err
	}
	if h, err = t.linear(b, h, p+"ffn.out"); err != nil {
		return nil, err
	}
	return t.dropout(h, train)
}
