package export

import (
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// KindReaderLM is the config.json "kind" of a LLaMA fine-tune's checkpoints (recipe kind
// reader_lm, experiment/readerlm).
const KindReaderLM = "reader_lm"

func init() { register(KindReaderLM, exportReaderLM) }

// ReaderLMConfig is config.json of a reader_lm checkpoint: the base model it started from and,
// with LoRA, the adapters' configuration. The checkpoint holds every parameter of the Llama
// (full fine-tuning) or only the adapters (LoRA: the base weights are init_from's, frozen).
type ReaderLMConfig struct {
	Kind     string            `json:"kind"`      // "reader_lm"
	InitFrom string            `json:"init_from"` // the base: a LLaMA GGUF file or Hugging Face directory (its tokenizer too)
	Llama    model.LlamaConfig `json:"llama"`
	LoRA     *model.LoRAConfig `json:"lora,omitempty"` // nil: full fine-tuning
}

// OpenReaderLM rebuilds a reader_lm checkpoint's model: init_from's LLaMA and tokenizer, then
// the checkpoint's tensors, which must be exactly the model's parameters (full fine-tuning) or
// its adapters (LoRA, returned attached, unmerged).
func OpenReaderLM(ck *checkpoints.Checkpoint) (*model.Llama, *tokenize.GGUFTokenizer, ReaderLMConfig, error) {
	var c ReaderLMConfig
	cfgPath := filepath.Join(ck.Dir, checkpoints.ConfigFile)
	if err := ck.DecodeConfig(&c); err != nil {
		return nil, nil, c, err
	}
	m, tok, err := OpenLlama(c.InitFrom)
	if err != nil {
		return nil, nil, c, fmt.Errorf("%s: init_from: %w", cfgPath, err)
	}
	if m.Cfg != c.Llama {
		return nil, nil, c, fmt.Errorf("%s: init_from %s is %+v, the checkpoint was trained from %+v", cfgPath, c.InitFrom, m.Cfg, c.Llama)
	}
	params := m.Params()
	if c.LoRA != nil {
		l, err := model.NewLlamaLoRA(m, *c.LoRA, 0)
		if err != nil {
			return nil, nil, c, fmt.Errorf("%s: %w", cfgPath, err)
		}
		m.AttachLoRA(l)
		params = l.Params()
	}
	if err := loadExactly(ck, params); err != nil {
		return nil, nil, c, err
	}
	return m, tok, c, nil
}

// exportReaderLM writes a reader_lm run as a LlamaForCausalLM directory (WriteLlamaHF), LoRA
// merged into the weights (Llama.MergeLoRA); with Options.Adapter, a LoRA run's adapters alone
// as a peft directory (WriteLlamaPEFT) whose base_model_name_or_path is init_from.
func exportReaderLM(r *Run, dir string, o Options) error {
	m, tok, c, err := OpenReaderLM(r.Checkpoint)
	if err != nil {
		return err
	}
	if o.Adapter {
		if c.LoRA == nil {
			return fmt.Errorf("%s: a full fine-tune has no adapters to export alone", r.Dir)
		}
		return writeLlamaPEFT(dir, m.LoRA(), c.InitFrom)
	}
	merged, err := m.MergeLoRA()
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "export: LLaMA (%d layers, H = %d, V = %d) from %s, %s\n", m.Cfg.Layers, m.Cfg.Hidden, m.Cfg.Vocab,
		r.Checkpoint.Dir, map[bool]string{true: "LoRA merged", false: "full fine-tune"}[c.LoRA != nil])
	return writeLlamaHF(dir, merged, tok)
}
