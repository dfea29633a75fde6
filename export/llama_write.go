package export

import (
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// hfLlamaOut is the config.json WriteLlamaHF writes: transformers' LlamaConfig with the sizes
// of model.LlamaConfig, both spellings of the RoPE base (rope_theta for transformers 4,
// rope_parameters for 5) and the special token ids of the tokenizer.
type hfLlamaOut struct {
	Architectures  []string `json:"architectures"`
	ModelType      string   `json:"model_type"`
	Hidden         int      `json:"hidden_size"`
	Layers         int      `json:"num_hidden_layers"`
	Heads          int      `json:"num_attention_heads"`
	KVHeads        int      `json:"num_key_value_heads"`
	HeadDim        int      `json:"head_dim"`
	FFN            int      `json:"intermediate_size"`
	Vocab          int      `json:"vocab_size"`
	RMSEps         float64  `json:"rms_norm_eps"`
	MaxPosition    int      `json:"max_position_embeddings"`
	TieEmbeddings  bool     `json:"tie_word_embeddings"`
	RopeTheta      float64  `json:"rope_theta"`
	RopeParameters struct {
		RopeTheta float64 `json:"rope_theta"`
		RopeType  string  `json:"rope_type"`
	} `json:"rope_parameters"`
	HiddenAct        string  `json:"hidden_act"`
	AttentionBias    bool    `json:"attention_bias"`
	AttentionDropout float64 `json:"attention_dropout"`
	MLPBias          bool    `json:"mlp_bias"`
	InitializerRange float64 `json:"initializer_range"`
	PretrainingTP    int     `json:"pretraining_tp"`
	BosTokenID       int     `json:"bos_token_id"`
	EosTokenID       int     `json:"eos_token_id"`
	PadTokenID       int     `json:"pad_token_id"`
	UseCache         bool    `json:"use_cache"`
	TorchDtype       string  `json:"torch_dtype"`
	Dtype            string  `json:"dtype"`
}

// llamaGeneration is generation_config.json of a LLaMA export: greedy decoding that stops at
// the tokenizer's eos.
type llamaGeneration struct {
	BosTokenID int  `json:"bos_token_id"`
	EosTokenID int  `json:"eos_token_id"`
	PadTokenID int  `json:"pad_token_id"`
	DoSample   bool `json:"do_sample"`
}

// WriteLlamaHF exports m with its tokenizer into the new directory out as a Hugging Face
// LlamaForCausalLM directory: config.json (hfLlamaOut), model.safetensors (float32, every
// parameter under its LlamaForCausalLM name and [out,in] shape, Q/K rows in transformers'
// rotate_half order as model.Llama keeps them; no lm_head.weight with tied embeddings),
// tokenizer.json and tokenizer_config.json with the chat template (GGUFTokenizer.WriteHF) and
// generation_config.json (bos/eos/pad of the tokenizer, greedy). transformers'
// AutoModelForCausalLM.from_pretrained(out) computes the same logits
// (tools/interop/llama_export.py); OpenLlamaHF(out) reads the same weights bit for bit. out
// must not exist or be empty; it appears complete or not at all. Errors: a float64 model, a
// tokenizer larger than the vocabulary.
func WriteLlamaHF(out string, m *model.Llama, tok *tokenize.GGUFTokenizer) error {
	return writeDir(out, func(tmp string) error { return writeLlamaHF(tmp, m, tok) })
}

// writeLlamaHF writes the files of WriteLlamaHF into the existing directory dir.
func writeLlamaHF(dir string, m *model.Llama, tok *tokenize.GGUFTokenizer) error {
	c := m.Cfg
	if tok.VocabSize() > c.Vocab {
		return fmt.Errorf("export: the tokenizer has %d tokens, the model's vocabulary is %d", tok.VocabSize(), c.Vocab)
	}
	ts, err := llamaTensors(m)
	if err != nil {
		return err
	}
	h := hfLlamaOut{
		Architectures: []string{"LlamaForCausalLM"}, ModelType: "llama",
		Hidden: c.Hidden, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim(), FFN: c.FFN,
		Vocab: c.Vocab, RMSEps: c.RMSEps, MaxPosition: c.MaxPosition, TieEmbeddings: c.TieEmbeddings, RopeTheta: c.RopeTheta,
		HiddenAct: "silu", InitializerRange: 0.02, PretrainingTP: 1,
		BosTokenID: tok.BOS(), EosTokenID: tok.EOS(), PadTokenID: tok.PAD(), UseCache: true, TorchDtype: "float32", Dtype: "float32",
	}
	h.RopeParameters.RopeTheta, h.RopeParameters.RopeType = c.RopeTheta, "default"
	if err := writeHFModel(dir, ts, h); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, GenerationConfigFile), llamaGeneration{
		BosTokenID: tok.BOS(), EosTokenID: tok.EOS(), PadTokenID: tok.PAD(),
	}); err != nil {
		return err
	}
	return tok.WriteHF(dir)
}

// llamaTensors returns m's parameters as float32 tensors under their own (transformers) names,
// in the order of model.Llama's table.
func llamaTensors(m *model.Llama) ([]checkpoints.Tensor, error) {
	var ts []checkpoints.Tensor
	for _, p := range m.Params() {
		v, ok := p.Value.Data().([]float32)
		if !ok {
			return nil, fmt.Errorf("export: llama parameter %s is %v, want float32", p.Name, p.Value.Dtype())
		}
		ts = append(ts, checkpoints.Tensor{Name: p.Name, Shape: append([]int(nil), p.Value.Shape()...), Data: v})
	}
	return ts, nil
}

// ExportLlamaGGUF exports the LLaMA model and tokenizer of a GGUF file (model.LoadLlamaGGUF:
// dequantized to float32, Q/K rows un-permuted; tokenize.LoadGGUFTokenizer) into the new
// directory out, as WriteLlamaHF.
func ExportLlamaGGUF(path, out string) (*model.Llama, error) {
	m, tok, err := OpenLlamaGGUF(path)
	if err != nil {
		return nil, err
	}
	return m, WriteLlamaHF(out, m, tok)
}

// OpenLlamaGGUF reads the LLaMA model and its tokenizer from a GGUF file.
func OpenLlamaGGUF(path string) (*model.Llama, *tokenize.GGUFTokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.LoadLlamaGGUF(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	tok, err := tokenize.LoadGGUFTokenizer(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, tok, nil
}
