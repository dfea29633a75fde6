package readerlm

import (
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/model"
)

// section is the [reader_lm] table, lora the [lora] table; both owned by this kind.
var (
	section     = configs.NewSection("reader_lm", defaultConfig, check)
	loraSection = configs.NewSection("lora", defaultLoRA, checkLoRA)
)

// Of returns the [reader_lm] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "reader_lm") }

// LoRAOf returns the [lora] section of a recipe.
func LoRAOf(r *configs.Recipe) *LoRA { return configs.SectionOf[LoRA](r, "lora") }

// Config is the [reader_lm] section: causal-LM fine-tuning of a pretrained LLaMA on the texts
// of the queries of data.dir (data.train_split's judged queries for training, data.dev_split's
// for the held-out perplexity).
type Config struct {
	// InitFrom is the pretrained model, relative to the recipe's directory; required: a LLaMA
	// GGUF file (its tokenizer is used), or a Hugging Face LlamaForCausalLM directory
	// (config.json, model.safetensors in float32, float16 or bfloat16, tokenizer.json and
	// tokenizer_config.json: export.OpenLlama), e.g. one `train export` wrote.
	InitFrom string `toml:"init_from"`
	// Mode is "lora" (adapters of [lora] trained, the base frozen) or "full" (every parameter).
	// Default "lora".
	Mode string `toml:"mode"`
	// MaxLength is L, the tokens of a training sequence (the text's tokens, cut, then eos);
	// 2..4096. Default 64.
	MaxLength int `toml:"max_length"`
	// EvalBatch is the sequences per forward pass of the perplexity evaluation;
	// 1..configs.MaxBatch. Default 16.
	EvalBatch int `toml:"eval_batch"`
	// MicroBatch is the sequences per forward and backward pass of training: a step of
	// train.batch_size sequences runs ceil(batch_size / micro_batch) passes and accumulates
	// their gradients, each pass's mean NLL weighted by its share of the step's target tokens,
	// so the step's gradient is the full batch's (up to float32 summation order; LoRA dropout
	// masks are drawn pass by pass). The activations held at once shrink by batch_size /
	// micro_batch: the memory lever for long sequences (4 x 512 tokens of SmolLM2). 0 (the
	// default): batch_size, one pass.
	MicroBatch int `toml:"micro_batch"`
	// GradientCheckpointing recomputes each decoder layer's activations in the backward pass
	// from the layer's input, the only activation the forward pass keeps per layer
	// (model.LlamaCheckpointed; transformers' gradient_checkpointing_enable): the activations
	// held at once shrink from all layers' to one layer's plus the layers' inputs, for about
	// one more forward pass of compute. Losses and gradients are the same bit for bit. Default
	// false.
	GradientCheckpointing bool `toml:"gradient_checkpointing"`
}

// LoRA is the [lora] section (model.LoRAConfig; peft's LoraConfig names).
type LoRA struct {
	// Rank is r; >= 1. Default 8.
	Rank int `toml:"rank"`
	// Alpha scales the adapters by alpha/rank; > 0. Default 16.
	Alpha float64 `toml:"alpha"`
	// Dropout is the dropout on the adapters' input in training; in [0,1). Default 0.05.
	Dropout float64 `toml:"dropout"`
	// Targets are the adapted projections, among q_proj k_proj v_proj o_proj gate_proj up_proj
	// down_proj. Default ["q_proj", "v_proj"].
	Targets []string `toml:"targets"`
}

func defaultConfig() Config { return Config{Mode: "lora", MaxLength: 64, EvalBatch: 16} }

func defaultLoRA() LoRA {
	return LoRA{Rank: 8, Alpha: 16, Dropout: 0.05, Targets: []string{"q_proj", "v_proj"}}
}

func check(v *configs.Checker, r *configs.Recipe, c *Config) {
	if c.InitFrom == "" {
		v.Fail("reader_lm.init_from", "required: a LLaMA GGUF file or Hugging Face directory")
	}
	if c.InitFrom != "" { // a file or a directory, relative to the recipe
		c.InitFrom = filepath.Clean(v.Abs(c.InitFrom))
		if _, err := os.Stat(c.InitFrom); err != nil {
			v.Fail("reader_lm.init_from", "%v", err)
		}
	}
	v.OneOf("reader_lm.mode", c.Mode, []string{"lora", "full"})
	configs.AtLeast(v, "reader_lm.max_length", c.MaxLength, 2)
	if c.MaxLength > 4096 {
		v.Fail("reader_lm.max_length", "must be <= 4096, got %d", c.MaxLength)
	}
	configs.AtLeast(v, "reader_lm.eval_batch", c.EvalBatch, 1)
	if c.EvalBatch > configs.MaxBatch {
		v.Fail("reader_lm.eval_batch", "must be <= %d (configs.MaxBatch, as train.batch_size), got %d", configs.MaxBatch, c.EvalBatch)
	}
	if c.MicroBatch < 0 || c.MicroBatch > r.Train.BatchSize {
		v.Fail("reader_lm.micro_batch", "must be in [0, train.batch_size = %d], got %d", r.Train.BatchSize, c.MicroBatch)
	}
}

// micro is the sequences per training pass (MicroBatch, or the whole batch).
func (c *Config) micro(batch int) int {
	if c.MicroBatch == 0 {
		return batch
	}
	return c.MicroBatch
}

func checkLoRA(v *configs.Checker, _ *configs.Recipe, l *LoRA) {
	configs.AtLeast(v, "lora.rank", l.Rank, 1)
	v.Positive("lora.alpha", l.Alpha)
	if !(l.Dropout >= 0 && l.Dropout < 1) {
		v.Fail("lora.dropout", "must be in [0,1), got %g", l.Dropout)
	}
	if len(l.Targets) == 0 {
		v.Fail("lora.targets", "must name at least one projection")
	}
	v.DistinctOf("lora.targets", l.Targets, slices.Sorted(maps.Keys(model.LoRATargets)))
}

// config is the model.LoRAConfig of the section.
func (l *LoRA) config() model.LoRAConfig {
	return model.LoRAConfig{Rank: l.Rank, Alpha: l.Alpha, Dropout: l.Dropout, Targets: slices.Clone(l.Targets)}
}
