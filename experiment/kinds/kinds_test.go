package kinds

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
)

// TestShippedRecipesLoad loads every recipes/*.toml with the kinds registered, and
// checks that its resolved recipe loads back to the same recipe (what -resume reads).
func TestShippedRecipesLoad(t *testing.T) {
	paths, err := filepath.Glob("../../recipes/*.toml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recipes: %v", err)
	}
	for _, p := range paths {
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

// TestKindsAreRegistered: the six kinds Run implements are registered.
func TestKindsAreRegistered(t *testing.T) {
	want := []string{"rag", "realm", "replug", "reranker", "retriever", "selfrag"}
	if got := configs.Kinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("registered kinds %v, want %v", got, want)
	}
}
