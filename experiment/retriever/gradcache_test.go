package retriever

import (
	"context"
	"io"
	"math"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestGradCacheSlice trains the slice recipe (no pretraining, no dropout) with
// train.mini_batch_size = 4, batches of 16 queries and 32 passages in chunks of 4: it ends within
// rounding of the same recipe trained in one graph per batch (the float32 gradient sums run in
// another order for 60 steps), and a run interrupted mid-train and resumed ends with the same
// numbers as the uninterrupted one.
func TestGradCacheSlice(t *testing.T) {
	dir := testkit.NewSlice(t)
	run := func(mini int, o experiment.Options) (string, error) {
		rec := testkit.SmallRecipe(t, dir, "")
		rec.Model.Dropout, rec.Pretrain.Steps, rec.Train.MiniBatchSize = 0, 0, mini
		o.Progress = io.Discard
		return experiment.Run(context.Background(), rec, o)
	}
	plainDir, err := run(0, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cachedDir, err := run(4, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := experiment.ReadMetrics(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := experiment.ReadMetrics(cachedDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dense nDCG@10: one graph %.4f, cached %.4f", plain["dense/nDCG@10"], cached["dense/nDCG@10"])
	if d := math.Abs(plain["dense/nDCG@10"] - cached["dense/nDCG@10"]); d > 0.02 {
		t.Errorf("dense nDCG@10 %.4f cached, %.4f in one graph", cached["dense/nDCG@10"], plain["dense/nDCG@10"])
	}
	lp, lc := testkit.ReadLog(t, plainDir), testkit.ReadLog(t, cachedDir)
	if len(lp) == 0 || len(lp) != len(lc) {
		t.Fatalf("log.jsonl: %d lines in one graph, %d cached", len(lp), len(lc))
	}
	broken, err := run(4, experiment.Options{InterruptPhase: "train", InterruptAt: 30})
	if err == nil {
		t.Fatal("interrupted run: no error")
	}
	resumed, err := run(4, experiment.Options{ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SameMetrics(t, "", cachedDir, resumed, testkit.Quality)
}
