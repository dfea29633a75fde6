package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRecipe loads arbitrary bytes as a recipe in a directory laid out like the repository's
// (recipes/ beside datasets/), seeded with the shipped recipes. A recipe that loads must write
// (WriteResolved) and load back to an equal recipe, and its errors are one line naming the file.
func FuzzRecipe(f *testing.F) {
	seeds, err := filepath.Glob("../recipes/*.toml")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no shipped recipes: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	root := f.TempDir() // reused: a worker runs one input at a time
	datasets, err := filepath.Abs("../datasets")
	if err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(datasets, filepath.Join(root, "datasets")); err != nil {
		f.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "recipes"), 0o755); err != nil {
		f.Fatal(err)
	}
	path, resolved := filepath.Join(root, "recipes", "fuzz.toml"), filepath.Join(root, "recipes", "resolved.toml")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Load(path)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, path) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line naming %s", msg, path)
			}
			return
		}
		if err := r.WriteResolved(resolved); err != nil {
			t.Fatalf("a loaded recipe cannot be written: %v", err)
		}
		back, err := Load(resolved)
		if err != nil {
			t.Fatalf("the resolved recipe does not load: %v", err)
		}
		if d, err := r.Diff(back); err != nil || d != "" {
			t.Fatalf("write then load changed %s (%v)", d, err)
		}
	})
}
