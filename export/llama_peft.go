package export

import (
	"fmt"
	"path/filepath"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
)

// File names of a PEFT adapter directory.
const (
	AdapterConfigFile = "adapter_config.json"
	AdapterModelFile  = "adapter_model.safetensors"
)

// peftPrefix is what peft's PeftModelForCausalLM puts before the base model's parameter names
// in adapter_model.safetensors.
const peftPrefix = "base_model.model."

// peftConfig is adapter_config.json of a LoRA adapter (peft's LoraConfig; keys a peft 0.21
// LoraConfig reads, defaults for those the adapter does not use).
type peftConfig struct {
	PeftType          string   `json:"peft_type"`
	TaskType          string   `json:"task_type"`
	BaseModel         string   `json:"base_model_name_or_path"`
	R                 int      `json:"r"`
	LoraAlpha         float64  `json:"lora_alpha"`
	LoraDropout       float64  `json:"lora_dropout"`
	TargetModules     []string `json:"target_modules"`
	Bias              string   `json:"bias"`
	FanInFanOut       bool     `json:"fan_in_fan_out"`
	InferenceMode     bool     `json:"inference_mode"`
	InitLoraWeights   bool     `json:"init_lora_weights"`
	UseRSLoRA         bool     `json:"use_rslora"`
	UseDoRA           bool     `json:"use_dora"`
	ModulesToSave     []string `json:"modules_to_save"`
	LayersToTransform []int    `json:"layers_to_transform"`
}

// WriteLlamaPEFT writes LoRA adapters alone into the new directory out as a peft adapter
// directory: adapter_config.json (r, lora_alpha, lora_dropout, target_modules, task_type
// CAUSAL_LM, base_model_name_or_path base, e.g. the directory of WriteLlamaHF's base export) and
// adapter_model.safetensors (float32, base_model.model.<weight>.lora_A.weight [r,in] and
// lora_B.weight [out,r], Q/K rows of B in the order of the exported Q/K weights).
// peft.PeftModel.from_pretrained(base model, out) computes the adapted model
// (tools/interop/llama_export.py --peft). out must not exist or be empty; it appears complete or
// not at all.
func WriteLlamaPEFT(out string, l *model.LlamaLoRA, base string) error {
	return writeDir(out, func(tmp string) error { return writeLlamaPEFT(tmp, l, base) })
}

// writeLlamaPEFT writes the files of WriteLlamaPEFT into the existing directory tmp.
func writeLlamaPEFT(tmp string, l *model.LlamaLoRA, base string) error {
	var ts []checkpoints.Tensor
	for _, p := range l.Params() {
		v, ok := p.Value.Data().([]float32)
		if !ok {
			return fmt.Errorf("export: lora parameter %s is %v, want float32", p.Name, p.Value.Dtype())
		}
		ts = append(ts, checkpoints.Tensor{Name: peftPrefix + p.Name, Shape: append([]int(nil), p.Value.Shape()...), Data: v})
	}
	if err := writeSafetensorsPT(filepath.Join(tmp, AdapterModelFile), ts); err != nil {
		return err
	}
	c := l.Cfg
	return atomicfile.WriteJSON(filepath.Join(tmp, AdapterConfigFile), peftConfig{
		PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModel: base, R: c.Rank, LoraAlpha: c.Alpha, LoraDropout: c.Dropout,
		TargetModules: c.Targets, Bias: "none", InferenceMode: true, InitLoraWeights: true,
	})
}
