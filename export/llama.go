package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"

	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
)

// hfLlamaConfig is what OpenLlamaHF reads of a LlamaForCausalLM config.json: the sizes of
// model.LlamaConfig and the keys whose other values would change the architecture.
type hfLlamaConfig struct {
	ModelType     string   `json:"model_type"`
	Hidden        int      `json:"hidden_size"`
	Layers        int      `json:"num_hidden_layers"`
	Heads         int      `json:"num_attention_heads"`
	KVHeads       *int     `json:"num_key_value_heads"`
	HeadDim       *int     `json:"head_dim"`
	FFN           int      `json:"intermediate_size"`
	Vocab         int      `json:"vocab_size"`
	RMSEps        *float64 `json:"rms_norm_eps"`
	MaxPosition   int      `json:"max_position_embeddings"`
	TieEmbeddings *bool    `json:"tie_word_embeddings"`
	RopeTheta     *float64 `json:"rope_theta"` // transformers 4
	RopeScaling   any      `json:"rope_scaling"`
	RopeParams    *struct {
		RopeTheta *float64 `json:"rope_theta"`
		RopeType  string   `json:"rope_type"`
	} `json:"rope_parameters"` // transformers 5
	HiddenAct     *string `json:"hidden_act"`
	AttentionBias bool    `json:"attention_bias"`
	MLPBias       bool    `json:"mlp_bias"`
}

// llamaIgnored are tensors a LLaMA checkpoint may hold that are not parameters (older
// transformers saved the rotary inverse frequencies).
var llamaIgnored = regexp.MustCompile(`^model\.(layers\.\d+\.self_attn\.)?rotary_emb\.inv_freq$`)

// OpenLlamaHF reads a Hugging Face LlamaForCausalLM directory (config.json with model_type "llama",
// and model.safetensors or pytorch_model.bin in float32, float16, bfloat16 or float64, converted to
// float32 exactly) into a float32 model.Llama. config.json: hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default: the heads), intermediate_size, vocab_size,
// rms_norm_eps (default 1e-6), max_position_embeddings, tie_word_embeddings (default false),
// rope_theta or rope_parameters.rope_theta (default 10000; refused when both are given and differ).
// Refused, naming the key: another hidden_act than silu, attention or MLP biases, rope scaling, a
// head_dim other than hidden_size/num_attention_heads. Every parameter of the LlamaForCausalLM
// table (model.Llama) must be there with its shape, and nothing else but the rotary inv_freq
// buffers (and lm_head.weight with tied embeddings, which is dropped).
func OpenLlamaHF(dir string) (*model.Llama, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	b, err := bounded.ReadFile(cfgPath, bounded.ConfigJSON)
	if err != nil {
		return nil, err
	}
	var h hfLlamaConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	cfg, err := h.config()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	path, raw, err := readRawWeights(dir)
	if err != nil {
		return nil, err
	}
	names, shapes := cfg.LlamaShapes()
	want := make(map[string][]int, len(names))
	for i, n := range names {
		want[n] = shapes[i]
	}
	byName := map[string][]float32{}
	for _, r := range raw {
		s, ok := want[r.Name]
		switch {
		case !ok && (llamaIgnored.MatchString(r.Name) || cfg.TieEmbeddings && r.Name == model.LlamaHead):
			continue
		case !ok:
			return nil, fmt.Errorf("%s: tensor %q is not a parameter of LlamaForCausalLM with %s", path, r.Name, ConfigFile)
		case !slices.Equal(r.Shape, s):
			return nil, fmt.Errorf("%s: tensor %q has shape %v, want %v from %s", path, r.Name, r.Shape, s, ConfigFile)
		}
		v, err := toFloat32(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		byName[r.Name] = v
	}
	for _, n := range names {
		if _, ok := byName[n]; !ok {
			return nil, fmt.Errorf("%s: no tensor %q", path, n)
		}
	}
	return model.NewLlamaFrom(cfg, tensor.Float32, func(p *model.Param) error {
		copy(p.Value.Data().([]float32), byName[p.Name])
		return nil
	})
}

// config turns the JSON into a model.LlamaConfig, applying transformers' defaults.
func (h hfLlamaConfig) config() (model.LlamaConfig, error) {
	if h.ModelType != "llama" {
		return model.LlamaConfig{}, fmt.Errorf("model_type %q, want \"llama\"", h.ModelType)
	}
	if h.HiddenAct != nil && *h.HiddenAct != "silu" {
		return model.LlamaConfig{}, fmt.Errorf("hidden_act %q: only \"silu\" (SwiGLU) is supported", *h.HiddenAct)
	}
	if h.AttentionBias || h.MLPBias {
		return model.LlamaConfig{}, fmt.Errorf("attention_bias or mlp_bias is true: LLaMA without biases only")
	}
	if h.RopeScaling != nil {
		return model.LlamaConfig{}, fmt.Errorf("rope_scaling %v: only the default rotary embedding is supported", h.RopeScaling)
	}
	c := model.LlamaConfig{Hidden: h.Hidden, Layers: h.Layers, Heads: h.Heads, KVHeads: h.Heads, FFN: h.FFN, Vocab: h.Vocab,
		RopeTheta: 10000, RMSEps: 1e-6, MaxPosition: h.MaxPosition}
	if h.KVHeads != nil {
		c.KVHeads = *h.KVHeads
	}
	if h.RMSEps != nil {
		c.RMSEps = *h.RMSEps
	}
	if h.TieEmbeddings != nil {
		c.TieEmbeddings = *h.TieEmbeddings
	}
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}
	if p := h.RopeParams; p != nil {
		if p.RopeType != "" && p.RopeType != "default" {
			return model.LlamaConfig{}, fmt.Errorf("rope_parameters.rope_type %q: only \"default\" is supported", p.RopeType)
		}
		if p.RopeTheta != nil {
			if h.RopeTheta != nil && *h.RopeTheta != *p.RopeTheta {
				return model.LlamaConfig{}, fmt.Errorf("rope_theta %g and rope_parameters.rope_theta %g disagree", *h.RopeTheta, *p.RopeTheta)
			}
			c.RopeTheta = *p.RopeTheta
		}
	}
	if h.HeadDim != nil && c.Heads > 0 && *h.HeadDim != c.Hidden/c.Heads {
		return model.LlamaConfig{}, fmt.Errorf("head_dim %d, want hidden_size / num_attention_heads = %d", *h.HeadDim, c.Hidden/c.Heads)
	}
	return c, nil
}
