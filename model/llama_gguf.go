package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/gguf"
	"gorgonia.org/tensor"
)

// GGUF tensor names of the LLaMA parameters (llama.cpp's LLM_ARCH_LLAMA; blk.N. prefixes the
// block's), by our (transformers') name without "model.layers.N.".
var ggufLlamaNames = map[string]string{
	LlamaEmbed:                        "token_embd.weight",
	LlamaFinalNorm:                    "output_norm.weight",
	LlamaHead:                         "output.weight",
	"input_layernorm.weight":          "attn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
}

// LlamaGGUFName returns the GGUF tensor name of a Llama parameter name.
func LlamaGGUFName(name string) (string, error) {
	if g, ok := ggufLlamaNames[name]; ok {
		return g, nil
	}
	if rest, ok := strings.CutPrefix(name, "model.layers."); ok {
		if i, what, ok := strings.Cut(rest, "."); ok {
			if _, err := strconv.Atoi(i); err == nil {
				if g, ok := ggufLlamaNames[what]; ok {
					return "blk." + i + "." + g, nil
				}
			}
		}
	}
	return "", fmt.Errorf("model: llama parameter %q has no GGUF name", name)
}

// LlamaConfigGGUF reads a LLaMA config from a GGUF file's metadata (general.architecture
// "llama"; llama.block_count, embedding_length, feed_forward_length, attention.head_count,
// attention.head_count_kv (default: head_count), rope.freq_base (default 10000),
// attention.layer_norm_rms_epsilon, context_length, vocab_size (default: token_embd's rows)) and
// checks it: bounds (LlamaConfig.Validate), rope.dimension_count if present, and the shape of
// every tensor the model needs. Tied embeddings when the file has no output.weight.
func LlamaConfigGGUF(f *gguf.File) (LlamaConfig, error) {
	path := f.Path()
	if a, _ := f.String("general.architecture"); a != "llama" {
		return LlamaConfig{}, fmt.Errorf("model: %s: general.architecture = %q, want \"llama\"", path, a)
	}
	var c LlamaConfig
	ints := []struct {
		key      string
		dst      *int
		required bool
	}{
		{"llama.block_count", &c.Layers, true}, {"llama.embedding_length", &c.Hidden, true},
		{"llama.feed_forward_length", &c.FFN, true}, {"llama.attention.head_count", &c.Heads, true},
		{"llama.attention.head_count_kv", &c.KVHeads, false}, {"llama.context_length", &c.MaxPosition, true},
		{"llama.vocab_size", &c.Vocab, false},
	}
	for _, k := range ints {
		v, ok := f.Uint(k.key)
		if !ok {
			if _, present := f.Meta[k.key]; present || k.required {
				return LlamaConfig{}, fmt.Errorf("model: %s: metadata %s is missing or not a non-negative integer", path, k.key)
			}
			continue
		}
		if v > 1<<31 {
			return LlamaConfig{}, fmt.Errorf("model: %s: metadata %s = %d is out of range", path, k.key, v)
		}
		*k.dst = int(v)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	emb, ok := f.Tensor(ggufLlamaNames[LlamaEmbed])
	if !ok {
		return LlamaConfig{}, fmt.Errorf("model: %s: no tensor %s", path, ggufLlamaNames[LlamaEmbed])
	}
	if s := emb.Shape(); c.Vocab == 0 && len(s) == 2 {
		c.Vocab = s[0]
	}
	c.RopeTheta = 10000
	if v, ok := f.Float("llama.rope.freq_base"); ok {
		c.RopeTheta = v
	}
	eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon")
	if !ok {
		return LlamaConfig{}, fmt.Errorf("model: %s: metadata llama.attention.layer_norm_rms_epsilon is missing", path)
	}
	c.RMSEps = eps
	_, hasHead := f.Tensor(ggufLlamaNames[LlamaHead])
	c.TieEmbeddings = !hasHead
	if err := c.Validate(); err != nil {
		return LlamaConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	if v, ok := f.Uint("llama.rope.dimension_count"); ok && v != uint64(c.HeadDim()) {
		return LlamaConfig{}, fmt.Errorf("model: %s: llama.rope.dimension_count = %d, want the head size %d (partial rotary embeddings are not supported)", path, v, c.HeadDim())
	}
	names, shapes := c.LlamaShapes()
	for i, n := range names {
		g, _ := LlamaGGUFName(n)
		ti, ok := f.Tensor(g)
		if !ok {
			return LlamaConfig{}, fmt.Errorf("model: %s: no tensor %s (%s)", path, g, n)
		}
		if s := ti.Shape(); !slices.Equal(s, shapes[i]) {
			return LlamaConfig{}, fmt.Errorf("model: %s: tensor %s has shape %v, want %v from the metadata", path, g, s, shapes[i])
		}
	}
	return c, nil
}

// LoadLlamaGGUF reads a LLaMA model from a GGUF file: LlamaConfigGGUF, then every tensor
// dequantized to float32 (gguf.File.Float32), Q and K rows put back from llama.cpp's
// interleaved RoPE layout into Hugging Face's (unpermuteRoPE), as transformers' GGUF loader
// does (LlamaTensorProcessor._reverse_permute_weights).
func LoadLlamaGGUF(f *gguf.File) (*Llama, error) {
	c, err := LlamaConfigGGUF(f)
	if err != nil {
		return nil, err
	}
	return NewLlamaFrom(c, tensor.Float32, func(p *Param) error {
		g, _ := LlamaGGUFName(p.Name)
		v, shape, err := f.Float32(g)
		if err != nil {
			return err
		}
		if !slices.Equal(shape, p.Value.Shape()) {
			return fmt.Errorf("model: %s: tensor %s has shape %v, want %v", f.Path(), g, shape, p.Value.Shape())
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("model: %s: tensor %s holds %g", f.Path(), g, x)
			}
		}
		switch {
		case strings.HasSuffix(p.Name, "self_attn.q_proj.weight"):
			v = unpermuteRoPE(v, c.Heads, c.Hidden)
		case strings.HasSuffix(p.Name, "self_attn.k_proj.weight"):
			v = unpermuteRoPE(v, c.KVHeads, c.Hidden)
		}
		copy(p.Value.Data().([]float32), v)
		return nil
	})
}

// unpermuteRoPE reorders the rows of a [heads·dh, cols] Q or K weight from llama.cpp's layout,
// where each head's rotary pairs are adjacent rows (2i, 2i+1), to Hugging Face's, where they
// are rows i and i+dh/2:
//
//	hf[h·dh + j·dh/2 + i] = gguf[h·dh + 2i + j],  i < dh/2, j ∈ {0,1}
//
// (llama.cpp's convert_hf_to_gguf.py permute, inverted).
func unpermuteRoPE(w []float32, heads, cols int) []float32 { return reorderRoPE(w, heads, cols, false) }

// permuteRoPE is the inverse of unpermuteRoPE (llama.cpp's convert_hf_to_gguf.py permute).
func permuteRoPE(w []float32, heads, cols int) []float32 { return reorderRoPE(w, heads, cols, true) }

// reorderRoPE moves row h·dh + j·dh/2 + i (Hugging Face's) to row h·dh + 2i + j (llama.cpp's),
// or with toGGUF false the other way.
func reorderRoPE(w []float32, heads, cols int, toGGUF bool) []float32 {
	rows := len(w) / cols
	dh := rows / heads
	half := dh / 2
	out := make([]float32, len(w))
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			for j := 0; j < 2; j++ {
				hf, gg := (h*dh+j*half+i)*cols, (h*dh+2*i+j)*cols
				if toGGUF {
					copy(out[gg:gg+cols], w[hf:hf+cols])
				} else {
					copy(out[hf:hf+cols], w[gg:gg+cols])
				}
			}
		}
	}
	return out
}

// WriteLlamaGGUF writes m as a float32 GGUF file in llama.cpp's layout (the inverse of
// LoadLlamaGGUF): the llama.* metadata of m.Cfg after meta (e.g. the tokenizer's keys), every
// parameter as an F32 tensor under its GGUF name, Q and K rows interleaved for llama.cpp's RoPE
// (permuteRoPE). Written through a temporary file and a rename (gguf.Write).
func WriteLlamaGGUF(path string, m *Llama, meta []gguf.KV) error {
	c := m.Cfg
	kv := append([]gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "llama.block_count", Value: uint32(c.Layers)},
		{Key: "llama.context_length", Value: uint32(c.MaxPosition)},
		{Key: "llama.embedding_length", Value: uint32(c.Hidden)},
		{Key: "llama.feed_forward_length", Value: uint32(c.FFN)},
		{Key: "llama.attention.head_count", Value: uint32(c.Heads)},
		{Key: "llama.attention.head_count_kv", Value: uint32(c.KVHeads)},
		{Key: "llama.rope.freq_base", Value: float32(c.RopeTheta)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(c.RMSEps)},
		{Key: "llama.rope.dimension_count", Value: uint32(c.HeadDim())},
		{Key: "llama.vocab_size", Value: uint32(c.Vocab)},
	}, meta...)
	var ts []gguf.TensorData
	for _, p := range m.Params() {
		g, err := LlamaGGUFName(p.Name)
		if err != nil {
			return err
		}
		v, ok := p.Value.Data().([]float32)
		if !ok {
			return fmt.Errorf("model: write %s: parameter %s is %v, want float32", path, p.Name, p.Value.Dtype())
		}
		s := p.Value.Shape()
		switch {
		case strings.HasSuffix(p.Name, "self_attn.q_proj.weight"):
			v = permuteRoPE(v, c.Heads, s[1])
		case strings.HasSuffix(p.Name, "self_attn.k_proj.weight"):
			v = permuteRoPE(v, c.KVHeads, s[1])
		}
		dims := make([]uint64, len(s))
		for i, d := range s {
			dims[len(s)-1-i] = uint64(d)
		}
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		ts = append(ts, gguf.TensorData{Name: g, Dims: dims, Type: gguf.F32, Data: b})
	}
	return gguf.Write(path, kv, ts)
}
