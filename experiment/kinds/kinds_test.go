package kinds

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
)

// TestShippedRecipesLoad loads every recipes/*.toml with the kinds registered, and
// checks that its resolved recipe loads back to the same recipe (what -resume reads). The
// recipes are loaded from a copy of the repository's layout whose pretrained/ holds an empty
// directory per checkpoint the recipes name (tools/pretrained/get.sh fills the real one; the
// distillation teacher scifact-minilm-teacher is a copy of the teacher recipe's model), so
// that they load on a clean clone.
func TestShippedRecipesLoad(t *testing.T) {
	paths, err := filepath.Glob("../../recipes/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recipes: %v", err)
	}
	root := t.TempDir()
	datasets, err := filepath.Abs("../../datasets")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(datasets, filepath.Join(root, "datasets")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"all-MiniLM-L6-v2", "bge-small-en-v1.5", "scifact-minilm-teacher"} {
		if err := os.MkdirAll(filepath.Join(root, "pretrained", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// reader_lm recipes name a GGUF file (an empty one stands in: Load checks that it exists).
	gguf := filepath.Join(root, "pretrained", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if err := os.MkdirAll(filepath.Dir(gguf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gguf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "recipes"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(root, "recipes", filepath.Base(p))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := configs.Load(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		out := filepath.Join(t.TempDir(), experiment.ResolvedRecipeFile)
		if err := rec.WriteResolved(out); err != nil {
			t.Fatal(err)
		}
		back, err := configs.Load(out)
		if err != nil {
			t.Errorf("%s: its resolved recipe does not load: %v", p, err)
			continue
		}
		if !reflect.DeepEqual(back.Values(), rec.Values()) {
			t.Errorf("%s: resolved recipe loads back different", p)
		}
	}
}

// TestKindsAreRegistered: the kinds Run implements are registered.
func TestKindsAreRegistered(t *testing.T) {
	want := []string{"atlas", "colbert", "fusion", "rag", "reader_lm", "realm", "replug", "replug_lm", "reranker", "retriever", "scifact_verify", "selfrag", "splade"}
	if got := configs.Kinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("registered kinds %v, want %v", got, want)
	}
}
