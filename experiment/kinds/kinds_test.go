package kinds

import (
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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
	if got, want := configs.Kinds(), shippedKinds(t); !reflect.DeepEqual(got, want) {
		t.Errorf("registered kinds %v, want %v", got, want)
	}
}

// shippedKinds is the sorted set of the kinds the shipped recipes (recipes/*.toml) name: every
// kind ships a recipe, and every blank import of kinds.go registers one kind, so a new kind is
// its package, its import line and its recipe, and no list in a test.
func shippedKinds(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../../recipes/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recipes: %v", err)
	}
	line := regexp.MustCompile(`(?m)^kind = "([a-z_]+)"`)
	set := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := line.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no kind line", p)
		}
		set[string(m[1])] = true
	}
	f, err := parser.ParseFile(token.NewFileSet(), "kinds.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	blank := 0
	for _, imp := range f.Imports {
		if imp.Name != nil && imp.Name.Name == "_" {
			blank++
		}
	}
	if blank != len(set) {
		t.Errorf("kinds.go links %d kind packages, the shipped recipes name %d kinds", blank, len(set))
	}
	return slices.Sorted(maps.Keys(set))
}
