package retriever

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/model"
)

// TestBF16RunDeterministicAndResumes: the slice recipe with train.precision = "bf16" gives the
// same run directory twice (metrics, TREC runs byte for byte), differs from its float32 run,
// resumes to the same run directory after an interruption in pretraining and in training, and
// leaves the process's products in float32 after each run.
func TestBF16RunDeterministicAndResumes(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := testkit.NewSlice(t)
	rec := testkit.SmallRecipe(t, dir, "")
	run := func(precision string) string {
		rec.Train.Precision = precision
		d, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if p := model.MatmulPrecision(); p != model.Float32 {
			t.Fatalf("after a %s run the products are %v", precision, p)
		}
		return d
	}
	a, b, f32 := run("bf16"), run("bf16"), run("float32")
	// The run directory's resolved recipe (what -resume DIR runs) keeps the precision.
	if r, err := configs.Load(filepath.Join(a, experiment.ResolvedRecipeFile)); err != nil {
		t.Fatal(err)
	} else if r.Train.Precision != "bf16" {
		t.Fatalf("%s: precision %q", experiment.ResolvedRecipeFile, r.Train.Precision)
	}
	sameBF16Run(t, "bf16 twice: ", a, b)
	ma, _ := experiment.ReadMetrics(a)
	mf, _ := experiment.ReadMetrics(f32)
	same := true
	for k, v := range testkit.Quality(mf) {
		if ma[k] != v {
			same = false
		}
	}
	if same {
		t.Error("the bf16 run's metrics are the float32 run's")
	}
	rec.Train.Precision = "bf16"
	for _, stop := range []struct {
		phase string
		at    int
	}{{"train", 30}, {"pretrain", 25}} {
		full, resumed, _ := testkit.Resume(t, rec, stop.phase, stop.at)
		sameBF16Run(t, stop.phase+": ", full, resumed)
		if p := model.MatmulPrecision(); p != model.Float32 {
			t.Fatalf("after the resumed run the products are %v", p)
		}
	}
}

// sameBF16Run fails t unless run directories a and b agree on metrics.json (timings aside),
// every TREC run byte for byte, and log.jsonl's training lines (losses, learning rates, norms).
func sameBF16Run(t *testing.T, where, a, b string) {
	t.Helper()
	testkit.SameMetrics(t, where, a, b, testkit.Quality)
	runs, _ := filepath.Glob(filepath.Join(a, "runs", "*.trec"))
	if len(runs) == 0 {
		t.Fatalf("%sno TREC runs in %s", where, a)
	}
	for _, r := range runs {
		testkit.SameFile(t, r, filepath.Join(b, "runs", filepath.Base(r)))
	}
	if w, g := testkit.TrainLines(t, a), testkit.TrainLines(t, b); len(w) == 0 || !slices.Equal(w, g) {
		t.Errorf("%slog.jsonl training lines: %v vs %v", where, g, w)
	}
}
