package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/ragtrain/ragtrain/export"
)

// runExport is `train export`: it writes a run's latest checkpoint (or a checkpoint directory)
// in the serving layout of its model kind (package export) and prints the output directory.
func runExport(args []string) error {
	var a exportArgs
	fs := exportFlags(&a)
	ok := func() bool { return a.run != "" && a.out != "" }
	if err := parseSub(fs, args, ok, "export: -run and -out are required, and nothing else"); err != nil {
		return err
	}
	if strings.HasSuffix(strings.ToLower(a.run), ".gguf") {
		if _, err := export.ExportLlamaGGUF(a.run, a.out); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		fmt.Println(a.out)
		return nil
	}
	if err := export.Export(a.run, a.out, export.Options{Adapter: a.adapter, Embeddings: a.embeddings, TruncateDim: a.truncateDim, Log: os.Stderr}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Println(a.out)
	return nil
}

// exportArgs are the flags of `train export`.
type exportArgs struct {
	run, out    string
	embeddings  bool
	adapter     bool
	truncateDim int
}

func exportFlags(a *exportArgs) *flag.FlagSet {
	fs := flag.NewFlagSet("train export", flag.ContinueOnError)
	fs.StringVar(&a.run, "run", "", "run directory (its latest checkpoint is exported), checkpoint directory, or a LLaMA GGUF file (*.gguf: exported as a Hugging Face LlamaForCausalLM directory in float32)")
	fs.StringVar(&a.out, "out", "", "new directory to write the export into (must not exist or be empty)")
	fs.BoolVar(&a.embeddings, "embeddings", true, "bi-encoders: also write the corpus embeddings (embeddings/: embeddings.npy, ids.txt, manifest.json)")
	fs.BoolVar(&a.adapter, "adapter", false, "LoRA fine-tunes (kind reader_lm): write the adapters alone as a peft adapter directory (adapter_config.json, adapter_model.safetensors) instead of the merged LlamaForCausalLM")
	fs.IntVar(&a.truncateDim, "truncate-dim", 0, "bi-encoders trained with loss.dims (Matryoshka): serve the first N coordinates (truncate_dim in config_sentence_transformers.json, embeddings of N columns); 0 = all")
	subUsage(fs, "Usage: train export -run RUN -out DIR [-embeddings=false] [-truncate-dim N] [-adapter]")
	return fs
}
