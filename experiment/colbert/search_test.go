package colbert_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/experiment"
	colbertkind "github.com/ragtrain/ragtrain/experiment/colbert"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/serve"
)

// train search of a ColBERT run's saved PLAID-style index (and BM25 over the run's corpus)
// writes the run's own test.colbert_plaid.trec (test.bm25.trec), byte for byte; an index whose
// model_hash is not the run's latest checkpoint's is refused.
func TestSearchReproducesTheRunsTREC(t *testing.T) {
	if testing.Short() {
		t.Skip("an end-to-end run")
	}
	rec := colbertkind.TinyRecipe(t, "colbert_contrastive", "")
	run, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	queries := filepath.Join(tmp, "queries.jsonl")
	testkit.SplitQueries(t, rec.Data.Dir, rec.Data.TestSplit, queries)
	var log strings.Builder
	for _, c := range []struct{ index, system string }{{filepath.Join(run, "plaid"), "colbert_plaid"}, {run, "bm25"}} {
		out := filepath.Join(tmp, c.system+".trec")
		if err := serve.Search(c.index, queries, out, rec.Eval.Depth, &log); err != nil {
			t.Fatalf("%s: %v", c.system, err)
		}
		want := filepath.Join(run, experiment.RunsDir, rec.Data.TestSplit+"."+c.system+".trec")
		testkit.SameFile(t, want, out)
		if b, _ := os.ReadFile(out); len(b) == 0 || strings.Fields(string(b))[5] != c.system {
			t.Errorf("%s: an empty run or another tag: %.80q", c.system, b)
		}
	}
	if !strings.Contains(log.String(), "(colbert_plaid)") || !strings.Contains(log.String(), "ncells 2") {
		t.Errorf("search log:\n%s", log.String())
	}
	// another model's index: the manifest's model_hash changed
	mpath := filepath.Join(run, "plaid", cb.ManifestFile)
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	m["model_hash"] = strings.Repeat("0", 64)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(mpath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = serve.Search(filepath.Join(run, "plaid"), queries, filepath.Join(tmp, "x.trec"), 10, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "was not built by it") {
		t.Fatalf("an index of another model: err = %v", err)
	}
	if _, serr := os.Stat(filepath.Join(tmp, "x.trec")); serr == nil {
		t.Error("a refused search wrote its run")
	}
}

// A run of zero training steps keeps its model as checkpoint 0, so train search serves its
// PLAID-style index: the run's own test.colbert_plaid.trec, byte for byte.
func TestZeroStepRunIsSearchable(t *testing.T) {
	if testing.Short() {
		t.Skip("an end-to-end run")
	}
	rec := testkit.ZeroSteps(t, colbertkind.TinyRecipe(t, "colbert_contrastive", ""))
	run, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	queries, out := filepath.Join(t.TempDir(), "queries.jsonl"), filepath.Join(t.TempDir(), "plaid.trec")
	testkit.SplitQueries(t, rec.Data.Dir, rec.Data.TestSplit, queries)
	if err := serve.Search(filepath.Join(run, "plaid"), queries, out, rec.Eval.Depth, io.Discard); err != nil {
		t.Fatal(err)
	}
	testkit.SameFile(t, filepath.Join(run, experiment.RunsDir, rec.Data.TestSplit+".colbert_plaid.trec"), out)
}
