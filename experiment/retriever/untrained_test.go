package retriever

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestFailedRunLeavesNoDirectory: issue 37's runs failing before their first step (a bad
// teacher cache, init_from, memory) left run directories that looked resumable
// (recipe.resolved.toml, tokenizer.json). A run stopped before its first step now leaves
// output_dir as it found it.
func TestFailedRunLeavesNoDirectory(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := testkit.SmallRecipe(t, dir, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stopped before the first step, after the run directory was made
	run, err := experiment.Run(ctx, rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err == nil {
		t.Fatalf("a cancelled run ended without error in %s", run)
	}
	entries, _ := os.ReadDir(rec.OutputDir)
	for _, e := range entries {
		sub, _ := os.ReadDir(filepath.Join(rec.OutputDir, e.Name()))
		var names []string
		for _, s := range sub {
			names = append(names, s.Name())
		}
		t.Errorf("%s left behind, holding %v (%v)", filepath.Join(rec.OutputDir, e.Name()), names, err)
	}
}
