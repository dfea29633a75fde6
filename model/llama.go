package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LlamaConfig is the shape of a LLaMA decoder (Touvron et al., 2023, "LLaMA: Open and Efficient
// Foundation Language Models"; transformers' LlamaConfig, whose config.json keys are given).
// One type, read from a GGUF file's llama.* metadata (LoadLlamaGGUF) or a Hugging Face
// config.json (LoadLlamaHF), and checked by Validate before anything is allocated.
type LlamaConfig struct {
	Hidden        int     `json:"hidden_size"`             // H
	Layers        int     `json:"num_hidden_layers"`       // decoder blocks
	Heads         int     `json:"num_attention_heads"`     // query heads; head size dh = H/Heads
	KVHeads       int     `json:"num_key_value_heads"`     // key/value heads (grouped-query attention); divides Heads
	FFN           int     `json:"intermediate_size"`       // F, the SwiGLU width
	Vocab         int     `json:"vocab_size"`              // V
	RopeTheta     float64 `json:"rope_theta"`              // RoPE base
	RMSEps        float64 `json:"rms_norm_eps"`            // RMSNorm eps
	MaxPosition   int     `json:"max_position_embeddings"` // the context length
	TieEmbeddings bool    `json:"tie_word_embeddings"`     // the LM head is the embedding matrix
}

// Bounds of LlamaConfig (far above any model this toolkit runs; they keep a hostile file from
// asking for absurd allocations before its tensors are checked).
const (
	llamaMaxHidden   = 1 << 15
	llamaMaxLayers   = 1 << 10
	llamaMaxHeads    = 1 << 10
	llamaMaxFFN      = 1 << 17
	llamaMaxVocab    = 1 << 21
	llamaMaxPosition = 1 << 21
)

// HeadDim is dh = Hidden/Heads.
func (c LlamaConfig) HeadDim() int { return c.Hidden / c.Heads }

// Validate checks every size against its bound and the relations between them.
func (c LlamaConfig) Validate() error {
	for _, b := range []struct {
		name   string
		v, max int
	}{
		{"hidden_size", c.Hidden, llamaMaxHidden}, {"num_hidden_layers", c.Layers, llamaMaxLayers},
		{"num_attention_heads", c.Heads, llamaMaxHeads}, {"num_key_value_heads", c.KVHeads, llamaMaxHeads},
		{"intermediate_size", c.FFN, llamaMaxFFN}, {"vocab_size", c.Vocab, llamaMaxVocab},
		{"max_position_embeddings", c.MaxPosition, llamaMaxPosition},
	} {
		if b.v <= 0 || b.v > b.max {
			return fmt.Errorf("model: llama: %s = %d, want 1..%d", b.name, b.v, b.max)
		}
	}
	if c.Hidden%c.Heads != 0 || c.HeadDim()%2 != 0 {
		return fmt.Errorf("model: llama: hidden_size %d is not num_attention_heads %d times an even head size", c.Hidden, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("model: llama: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("model: llama: rope_theta = %g, want a finite value above 1", c.RopeTheta)
	}
	if !(c.RMSEps > 0 && c.RMSEps < 1) {
		return fmt.Errorf("model: llama: rms_norm_eps = %g, want in (0,1)", c.RMSEps)
	}
	return nil
}

// Llama is a LLaMA decoder-only language model (transformers' LlamaForCausalLM): token
// embeddings, Layers pre-norm blocks
//
//	a = x + Attention(RoPE(RMSNorm₁(x)·W_qᵀ), RoPE(RMSNorm₁(x)·W_kᵀ), RMSNorm₁(x)·W_vᵀ)·W_oᵀ
//	x = a + (SwiGLU(RMSNorm₂(a)·W_gateᵀ, RMSNorm₂(a)·W_upᵀ))·W_downᵀ
//
// (causal grouped-query attention: query head j reads key/value head j/(Heads/KVHeads), scale
// 1/√dh; no biases, no dropout), a final RMSNorm, and logits h·Eᵀ against the LM head E [V,H],
// the embedding matrix itself when TieEmbeddings. Float32 compute (float64 in tests).
//
// Parameters carry transformers' LlamaForCausalLM state-dict names and shapes (linear weights
// [out,in]), so a Hugging Face checkpoint loads and exports without renaming:
//
//	model.embed_tokens.weight                      [V,H]
//	model.layers.N.input_layernorm.weight          [H]
//	model.layers.N.self_attn.q_proj.weight         [Heads·dh, H]
//	model.layers.N.self_attn.k_proj.weight         [KVHeads·dh, H]
//	model.layers.N.self_attn.v_proj.weight         [KVHeads·dh, H]
//	model.layers.N.self_attn.o_proj.weight         [H, Heads·dh]
//	model.layers.N.post_attention_layernorm.weight [H]
//	model.layers.N.mlp.gate_proj.weight            [F,H]
//	model.layers.N.mlp.up_proj.weight              [F,H]
//	model.layers.N.mlp.down_proj.weight            [H,F]
//	model.norm.weight                              [H]
//	lm_head.weight                                 [V,H] (only without TieEmbeddings)
//
// Q and K rows are in Hugging Face's order (each head's first half, then its second half, as
// rotate_half pairs them); LoadLlamaGGUF undoes llama.cpp's interleaving.
type Llama struct {
	Cfg LlamaConfig

	params []*Param
	byName map[string]*Param
	dt     tensor.Dtype
	lora   *LlamaLoRA // adapters added to the block projections (AttachLoRA), nil for none
}

// Names of the LLaMA parameters.
const (
	LlamaEmbed     = "model.embed_tokens.weight"
	LlamaFinalNorm = "model.norm.weight"
	LlamaHead      = "lm_head.weight"
)

// llamaLayer returns the name of a block's parameter: llamaLayer(3, "mlp.up_proj") =
// "model.layers.3.mlp.up_proj.weight".
func llamaLayer(i int, what string) string { return fmt.Sprintf("model.layers.%d.%s.weight", i, what) }

// Block parameters, in the order of the table above.
var llamaBlockParams = []string{
	"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
	"post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
}

// LlamaShapes returns every parameter name with its shape, in the order of Params.
func (c LlamaConfig) LlamaShapes() ([]string, [][]int) {
	h, f, q, kv := c.Hidden, c.FFN, c.Heads*c.HeadDim(), c.KVHeads*c.HeadDim()
	names := []string{LlamaEmbed}
	shapes := [][]int{{c.Vocab, h}}
	block := [][]int{{h}, {q, h}, {kv, h}, {kv, h}, {h, q}, {h}, {f, h}, {f, h}, {h, f}}
	for i := 0; i < c.Layers; i++ {
		for j, p := range llamaBlockParams {
			names = append(names, llamaLayer(i, p))
			shapes = append(shapes, block[j])
		}
	}
	names = append(names, LlamaFinalNorm)
	shapes = append(shapes, []int{h})
	if !c.TieEmbeddings {
		names = append(names, LlamaHead)
		shapes = append(shapes, []int{c.Vocab, h})
	}
	return names, shapes
}

// NewLlama validates cfg and initialises float32 parameters from seed as transformers'
// LlamaPreTrainedModel does (initializer_range 0.02): weights and embeddings N(0, 0.02²),
// RMSNorm weights 1. All draws come from one PCG stream in the order of Params.
func NewLlama(cfg LlamaConfig, seed uint64) (*Llama, error) {
	return newLlama(cfg, seed, tensor.Float32)
}

func newLlama(cfg LlamaConfig, seed uint64, dt tensor.Dtype) (*Llama, error) {
	r := rand.New(rand.NewPCG(seed, streamInit))
	return NewLlamaFrom(cfg, dt, func(p *Param) error {
		if p.Value.Dims() == 1 {
			p.constant(1)
		} else {
			p.normal(r, 0.02)
		}
		return nil
	})
}

// newLlamaWith validates cfg, allocates every parameter and fills it with fill.
func NewLlamaFrom(cfg LlamaConfig, dt tensor.Dtype, fill func(*Param) error) (*Llama, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("model: llama of dtype %v, want float32 or float64", dt)
	}
	m := &Llama{Cfg: cfg, byName: map[string]*Param{}, dt: dt}
	names, shapes := cfg.LlamaShapes()
	for i, n := range names {
		p := newParam(n, dt, shapes[i]...)
		if err := fill(p); err != nil {
			return nil, err
		}
		m.params = append(m.params, p)
		m.byName[n] = p
	}
	return m, nil
}

// Params returns the parameters in the order of the table in Llama's doc.
func (m *Llama) Params() []*Param { return append([]*Param(nil), m.params...) }

// Param returns the parameter of that name, or nil.
func (m *Llama) Param(name string) *Param { return m.byName[name] }

// Dtype is the element type of the parameters.
func (m *Llama) Dtype() tensor.Dtype { return m.dt }

// HeadParam is the LM head E [V,H]: lm_head.weight, or the embedding matrix when tied.
func (m *Llama) HeadParam() *Param {
	if m.Cfg.TieEmbeddings {
		return m.byName[LlamaEmbed]
	}
	return m.byName[LlamaHead]
}

func (m *Llama) node(b *Binder, name string) *gorgonia.Node { return b.Node(m.byName[name]) }

// BuildHidden adds the decoder to the binder's graph for the batch in (B sequences of L tokens,
// right-padded: mask 0 after each sequence's tokens; token t of a sequence is at position t)
// and returns the final-norm token states [B*L,H].
func (m *Llama) BuildHidden(b *Binder, in *Inputs) (*gorgonia.Node, error) {
	c := m.Cfg
	x, err := m.embed(b, in)
	if err != nil {
		return nil, err
	}
	for i := 0; i < c.Layers; i++ {
		if x, err = m.block(b, in, x, i, nil); err != nil {
			return nil, fmt.Errorf("model: llama layer %d: %w", i, err)
		}
	}
	return RMSNorm(x, m.node(b, LlamaFinalNorm), c.RMSEps)
}

// embed checks the batch's length against the context and looks up its tokens' embeddings.
func (m *Llama) embed(b *Binder, in *Inputs) (*gorgonia.Node, error) {
	if in.L > m.Cfg.MaxPosition {
		return nil, fmt.Errorf("model: llama: sequence length %d exceeds max_position_embeddings = %d", in.L, m.Cfg.MaxPosition)
	}
	return Gather(m.node(b, LlamaEmbed), in.IDs)
}

// BuildLogits is BuildHidden followed by the LM head: logits [B*L,V], row b*L+t scoring the
// token after position t of sequence b.
func (m *Llama) BuildLogits(b *Binder, in *Inputs) (*gorgonia.Node, error) {
	x, err := m.BuildHidden(b, in)
	if err != nil {
		return nil, err
	}
	return MatMul(x, b.Node(m.HeadParam()), false, true)
}

// BuildLogProbs returns the log-probabilities [M] of the targets t (LMLogProb over the token
// states and the LM head), the training objective's input.
func (m *Llama) BuildLogProbs(b *Binder, in *Inputs, t *Targets) (*gorgonia.Node, error) {
	x, err := m.BuildHidden(b, in)
	if err != nil {
		return nil, err
	}
	return LMLogProb(x, b.Node(m.HeadParam()), t.Pos, t.Tgt)
}

// block is one decoder layer on x [B*L,H]. seeds, when not nil, records the seeds of the
// layer's LoRA dropout masks, or replays them (gradient checkpointing: LlamaCheckpointed).
func (m *Llama) block(b *Binder, in *Inputs, x *gorgonia.Node, i int, seeds *dropSeeds) (*gorgonia.Node, error) {
	c := m.Cfg
	w := func(what string) *gorgonia.Node { return m.node(b, llamaLayer(i, what)) }
	proj := func(x *gorgonia.Node, what string) (*gorgonia.Node, error) {
		return m.linear(b, x, i, what, seeds)
	}
	h, err := RMSNorm(x, w("input_layernorm"), c.RMSEps)
	if err != nil {
		return nil, err
	}
	q, err := proj(h, "self_attn.q_proj")
	if err != nil {
		return nil, err
	}
	k, err := proj(h, "self_attn.k_proj")
	if err != nil {
		return nil, err
	}
	v, err := proj(h, "self_attn.v_proj")
	if err != nil {
		return nil, err
	}
	if q, err = RoPE(q, RoPEOptions{L: in.L, Heads: c.Heads, Theta: c.RopeTheta}); err != nil {
		return nil, err
	}
	if k, err = RoPE(k, RoPEOptions{L: in.L, Heads: c.KVHeads, Theta: c.RopeTheta}); err != nil {
		return nil, err
	}
	if c.KVHeads != c.Heads {
		if k, err = RepeatKV(k, c.KVHeads, c.Heads); err != nil {
			return nil, err
		}
		if v, err = RepeatKV(v, c.KVHeads, c.Heads); err != nil {
			return nil, err
		}
	}
	a, err := Attention(q, k, v, in.Mask, AttentionOptions{L: in.L, Heads: c.Heads, Scale: 1 / math.Sqrt(float64(c.HeadDim())), Causal: true})
	if err != nil {
		return nil, err
	}
	if a, err = proj(a, "self_attn.o_proj"); err != nil {
		return nil, err
	}
	if x, err = Add(x, a); err != nil {
		return nil, err
	}
	if h, err = RMSNorm(x, w("post_attention_layernorm"), c.RMSEps); err != nil {
		return nil, err
	}
	g, err := proj(h, "mlp.gate_proj")
	if err != nil {
		return nil, err
	}
	u, err := proj(h, "mlp.up_proj")
	if err != nil {
		return nil, err
	}
	if g, err = SwiGLU(g, u); err != nil {
		return nil, err
	}
	if g, err = proj(g, "mlp.down_proj"); err != nil {
		return nil, err
	}
	return Add(x, g)
}
