package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// OpenLlama reads a pretrained LLaMA and its tokenizer from path: a GGUF file
// (OpenLlamaGGUF) or a Hugging Face LlamaForCausalLM directory (OpenLlamaHF, with the
// tokenizer of its tokenizer.json and tokenizer_config.json, tokenize.LoadHFByteLevel).
func OpenLlama(path string) (*model.Llama, *tokenize.GGUFTokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.IsDir() {
		return OpenLlamaGGUF(path)
	}
	m, err := OpenLlamaHF(path)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenize.LoadHFByteLevel(path)
	if err != nil {
		return nil, nil, err
	}
	if tok.VocabSize() > m.Cfg.Vocab {
		return nil, nil, fmt.Errorf("%s: the tokenizer has %d tokens, the model's vocab_size is %d", path, tok.VocabSize(), m.Cfg.Vocab)
	}
	return m, tok, nil
}

// LlamaConfigOf reads the LLaMA configuration of a GGUF file (its header alone) or of a
// Hugging Face directory (config.json alone), without reading any weight.
func LlamaConfigOf(path string) (model.LlamaConfig, error) {
	st, err := os.Stat(path)
	if err != nil {
		return model.LlamaConfig{}, err
	}
	if !st.IsDir() {
		f, err := gguf.Open(path)
		if err != nil {
			return model.LlamaConfig{}, err
		}
		c, err := model.LlamaConfigGGUF(f)
		if err != nil {
			return model.LlamaConfig{}, fmt.Errorf("%s: %w", path, err)
		}
		return c, nil
	}
	cfgPath := filepath.Join(path, ConfigFile)
	b, err := bounded.ReadFile(cfgPath, bounded.ConfigJSON)
	if err != nil {
		return model.LlamaConfig{}, err
	}
	var h hfLlamaConfig
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&h); err != nil {
		return model.LlamaConfig{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	c, err := h.config()
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		return model.LlamaConfig{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	return c, nil
}

// OpenLlamaModel reads a LLaMA ready to generate, and its tokenizer, from path: a GGUF file, a
// Hugging Face LlamaForCausalLM directory (OpenLlama), a reader_lm run directory (the checkpoint
// its "latest" names, or the newest intact one when that one is damaged, checkpoints.Load) or
// one of its checkpoint directories; a LoRA run's adapters are merged into the weights. from
// says in words what was read.
func OpenLlamaModel(path string) (m *model.Llama, tok *tokenize.GGUFTokenizer, from string, err error) {
	var ck *checkpoints.Checkpoint
	if _, e := os.Stat(filepath.Join(path, checkpoints.LatestFile)); e == nil {
		ck, err = checkpoints.Load(path)
	} else if _, e := os.Stat(filepath.Join(path, checkpoints.TrainerFile)); e == nil {
		ck, err = checkpoints.LoadDir(path)
	} else {
		m, tok, err = OpenLlama(path)
		return m, tok, path, err
	}
	if err != nil {
		return nil, nil, "", err
	}
	var k struct {
		Kind string `json:"kind"`
	}
	raw, _ := ck.Config.(json.RawMessage)
	if err := json.Unmarshal(raw, &k); err != nil || k.Kind != KindReaderLM {
		return nil, nil, "", fmt.Errorf("%s: a %q checkpoint, not a LLaMA (%q)", filepath.Join(ck.Dir, checkpoints.ConfigFile), k.Kind, KindReaderLM)
	}
	m, tok, c, err := OpenReaderLM(ck)
	if err != nil {
		return nil, nil, "", err
	}
	if m, err = m.MergeLoRA(); err != nil {
		return nil, nil, "", err
	}
	from = ck.Dir
	if c.LoRA != nil {
		from += " (LoRA merged)"
	}
	return m, tok, from, nil
}
