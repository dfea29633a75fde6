package splade_test

import (
	"context"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/serve"
	"github.com/ragtrain/ragtrain/experiment/splade"
)

// A run of zero training steps (zero-shot SPLADE) keeps its model as checkpoint 0, so train
// search serves its index: the ranking of the run's own test.splade.trec (the queries are
// encoded one at a time there, in batches in the run: the scores agree within 1e-4).
func TestZeroStepRunIsSearchable(t *testing.T) {
	if testing.Short() {
		t.Skip("an end-to-end run")
	}
	rec := testkit.ZeroSteps(t, tinyRecipe(t, ""))
	run, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoints.Load(run)
	if err != nil || ck.Trainer.Step != 0 {
		t.Fatalf("the zero-step run's checkpoint: %v", err)
	}
	qpath := filepath.Join(t.TempDir(), "queries.jsonl")
	testkit.SplitQueries(t, rec.Data.Dir, "test", qpath)
	out := filepath.Join(t.TempDir(), "splade.trec")
	if err := serve.Search(filepath.Join(run, splade.IndexDir), qpath, out, rec.Eval.Depth, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := eval.ReadTREC(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := eval.ReadTREC(filepath.Join(run, experiment.RunsDir, "test.splade.trec"))
	if err != nil || len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d queries searched, the run ranked %d (%v)", len(got), len(want), err)
	}
	for q, w := range want {
		g := got[q]
		if len(g) != len(w) {
			t.Fatalf("query %s: %d hits, the run %d", q, len(g), len(w))
		}
		for i := range w {
			if g[i].DocID != w[i].DocID || math.Abs(g[i].Score-w[i].Score) > 1e-4*math.Max(1, math.Abs(w[i].Score)) {
				t.Fatalf("query %s hit %d: searched %v, the run %v", q, i, g[i], w[i])
			}
		}
	}
}
