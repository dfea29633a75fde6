package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportSubcommand trains a three-passage run and exports it as `train export` would.
func TestExportSubcommand(t *testing.T) {
	dir := t.TempDir()
	writeCollection(t, filepath.Join(dir, "data"), goodCorpus, goodQrels)
	if err := run([]string{"-recipe", writeRecipe(t, dir, "[pretrain]\nsteps = 0\n[train]\nsteps = 2\nbatch_size = 2\n")}); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	if len(runs) != 1 {
		t.Fatalf("run directories %v", runs)
	}
	out := filepath.Join(dir, "export")
	if err := runExport([]string{"-run", runs[0], "-out", out}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ragtrain.json", "model.safetensors", "config.json", "tokenizer.json", "embeddings/embeddings.npy", "embeddings/ids.txt"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("export lacks %s", f)
		}
	}
	ids, _ := os.ReadFile(filepath.Join(out, "embeddings", "ids.txt"))
	if string(ids) != "a\nb\nc\n" {
		t.Errorf("ids.txt = %q", ids)
	}
	if err := runExport([]string{"-run", runs[0], "-out", out}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("second export into the same directory: %v", err)
	}
	// -adapter is for reader_lm LoRA runs: another kind refuses it rather than silently
	// exporting the whole model
	if err := runExport([]string{"-run", runs[0], "-out", filepath.Join(dir, "adapter"), "-adapter"}); err == nil || !strings.Contains(err.Error(), "adapter") {
		t.Errorf("-adapter of a bi-encoder run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "adapter")); err == nil {
		t.Error("-adapter of a bi-encoder run wrote a directory")
	}
	if err := runExport([]string{"-run", runs[0]}); err == nil || !strings.Contains(err.Error(), "-out") {
		t.Errorf("no -out: %v", err)
	}
	if err := runExport([]string{"-run", dir, "-out", filepath.Join(dir, "x")}); err == nil || !strings.Contains(err.Error(), "neither a run directory") {
		t.Errorf("not a run: %v", err)
	}
}
