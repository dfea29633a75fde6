package retriever

import (
	"context"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestDynamicPaddingSlice trains the slice recipe (no pretraining, no dropout) with
// train.dynamic_padding: the queries of its batches fall in two length buckets, and a graph is
// built each time the shape changes (15 times in 60 batches), not per batch; the run ends within
// rounding of the same recipe padded to max_length (only the float32 sums' order differs, for 60
// steps); and with dropout, a run interrupted mid-train and resumed ends with the same numbers as
// the uninterrupted one.
func TestDynamicPaddingSlice(t *testing.T) {
	dir := testkit.NewSlice(t)
	run := func(dynamic bool, dropout float64, o experiment.Options) (string, string, error) {
		return runPaddingSlice(t, dir, dynamic, dropout, 0, o)
	}
	fixedDir, fixedOut, err := run(false, 0, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fixedOut, "dynamic padding") {
		t.Errorf("fixed padding reports dynamic padding:\n%s", fixedOut)
	}
	dynDir, out, err := run(true, 0, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`train: dynamic padding: (\d+) training graphs built; cached at the end: (.*) \(query/passage tokens\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no dynamic padding line in the output:\n%s", out)
	}
	built, _ := strconv.Atoi(m[1])
	t.Logf("%s graphs built; cached %s", m[1], m[2])
	// The queries fall in the buckets 32 and 48 (max_length), the passages in 48: the graphs
	// (32, 48) and (48, 48) pad 16·32 + 32·48 = 2048 and 2304 tokens, more together than fixed
	// padding's 2304, so each change of query bucket evicts one and builds the other: 15 runs of
	// one shape in the 60 batches of seed 3.
	if built != 15 || m[2] == "" {
		t.Errorf("%d training graphs built for 60 batches (cached %q), want 15", built, m[2])
	}
	fixed, err := experiment.ReadMetrics(fixedDir)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := experiment.ReadMetrics(dynDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dense nDCG@10: fixed padding %.4f, dynamic %.4f", fixed["dense/nDCG@10"], dyn["dense/nDCG@10"])
	if d := math.Abs(fixed["dense/nDCG@10"] - dyn["dense/nDCG@10"]); d > 0.02 || dyn["dense/nDCG@10"] == 0 {
		t.Errorf("dense nDCG@10 %.4f with dynamic padding, %.4f with fixed", dyn["dense/nDCG@10"], fixed["dense/nDCG@10"])
	}
	// Resume, with dropout (the slice recipe's 0.1): masks of (seed, phase, step) and the shape.
	fullDir, _, err := run(true, 0.1, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	broken, _, err := run(true, 0.1, experiment.Options{InterruptPhase: "train", InterruptAt: 30})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	resumed, _, err := run(true, 0.1, experiment.Options{ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SameMetrics(t, "", fullDir, resumed, testkit.Quality)
}

// runPaddingSlice runs the slice recipe without pretraining, with train.dynamic_padding = dynamic,
// model.dropout and train.mini_batch_size as given, and returns the run directory and the
// output.
func runPaddingSlice(t *testing.T, dir string, dynamic bool, dropout float64, mini int, o experiment.Options) (string, string, error) {
	rec := testkit.SmallRecipe(t, dir, "")
	rec.Model.Dropout, rec.Pretrain.Steps, rec.Train.DynamicPadding, rec.Train.MiniBatchSize = dropout, 0, dynamic, mini
	var out strings.Builder
	o.Progress, o.Out = io.Discard, &out
	d, err := experiment.Run(context.Background(), rec, o)
	return d, out.String(), err
}

// TestDynamicPaddingGradCacheSlice trains the slice recipe with train.dynamic_padding and
// train.mini_batch_size = 4 (each chunk padded to its bucket): one pair of chunk graphs of a
// shorter length is built (the queries' 32 beside max_length 48), the run ends within rounding of fixed
// padding without caching, and with dropout a run interrupted mid-train and resumed ends with the
// same numbers as the uninterrupted one.
func TestDynamicPaddingGradCacheSlice(t *testing.T) {
	dir := testkit.NewSlice(t)
	fixedDir, _, err := runPaddingSlice(t, dir, false, 0, 0, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dynDir, out, err := runPaddingSlice(t, dir, true, 0, 4, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`train: dynamic padding: (\d+) chunk graph pairs built`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no dynamic padding line in the output:\n%s", out)
	}
	// Query chunks of 4 fit in 32 tokens or need 48; every chunk of 4 abstracts has one cut to 48.
	if m[1] != "1" {
		t.Errorf("%s chunk graph pairs built besides the maximum lengths', want 1 (queries at 32)", m[1])
	}
	fixed, err := experiment.ReadMetrics(fixedDir)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := experiment.ReadMetrics(dynDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s chunk graph pairs; dense nDCG@10: fixed padding %.4f, dynamic cached %.4f", m[1], fixed["dense/nDCG@10"], dyn["dense/nDCG@10"])
	if d := math.Abs(fixed["dense/nDCG@10"] - dyn["dense/nDCG@10"]); d > 0.02 || dyn["dense/nDCG@10"] == 0 {
		t.Errorf("dense nDCG@10 %.4f with dynamic padding and gradient caching, %.4f with fixed padding", dyn["dense/nDCG@10"], fixed["dense/nDCG@10"])
	}
	fullDir, _, err := runPaddingSlice(t, dir, true, 0.1, 4, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	broken, _, err := runPaddingSlice(t, dir, true, 0.1, 4, experiment.Options{InterruptPhase: "train", InterruptAt: 30})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	resumed, _, err := runPaddingSlice(t, dir, true, 0.1, 4, experiment.Options{ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SameMetrics(t, "", fullDir, resumed, testkit.Quality)
}
