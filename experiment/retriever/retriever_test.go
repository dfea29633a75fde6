package retriever

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/index"
)

// randomBaseline is the mean nDCG@10 of seeded random orderings of the slice's corpus.
func randomBaseline(t *testing.T, dataDir string) float64 {
	ds, err := data.Load(dataDir, "test")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	const draws = 20
	for s := range draws {
		r := rand.New(rand.NewPCG(uint64(s), 9))
		run := eval.Run{}
		for _, q := range ds.Qrels["test"].QueryIDs() {
			perm := r.Perm(ds.Corpus.Len())
			hits := make([]index.Hit, len(perm))
			for i, d := range perm {
				hits[i] = index.Hit{DocID: ds.Corpus.IDs[d], Score: float64(len(perm) - i)}
			}
			run[q] = hits
		}
		m, err := eval.Evaluate(run, ds.Qrels["test"], []string{"nDCG@10"})
		if err != nil {
			t.Fatal(err)
		}
		sum += m["nDCG@10"]
	}
	return sum / draws
}

func TestRetrieverSliceBeatsRandomAndWritesOutputs(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := testkit.SmallRecipe(t, dir, "")
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(runDir)
	if err != nil {
		t.Fatal(err)
	}
	base := randomBaseline(t, filepath.Join(dir, "data"))
	t.Logf("random nDCG@10 %.4f; bm25 %.4f dense %.4f rrf %.4f", base, m["bm25/nDCG@10"], m["dense/nDCG@10"], m["rrf/nDCG@10"])
	if m["dense/nDCG@10"] < 2*base+0.05 {
		t.Errorf("dense nDCG@10 %.4f does not beat the random ranking's %.4f", m["dense/nDCG@10"], base)
	}
	for _, f := range []string{experiment.ResolvedRecipeFile, experiment.LogFile, experiment.MetricsFile, "tokenizer.json", "latest",
		"runs/test.bm25.trec", "runs/test.dense.trec", "runs/test.rrf.trec"} {
		if _, err := os.Stat(filepath.Join(runDir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	for _, k := range []string{"bm25/MRR@10", "dense/Recall@100", "rrf/MAP", "train/seconds", "train/examples_per_second"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %q", k)
		}
	}
	// The exact index holds the 200 passages' float32 vectors; every split's queries were timed.
	if want := float64(4 * 200 * rec.Model.Hidden); m["dense/index_bytes"] != want {
		t.Errorf("dense/index_bytes = %v, want 4 x 200 passages x %d = %v", m["dense/index_bytes"], rec.Model.Hidden, want)
	}
	for _, k := range []string{"dense/query_milliseconds", "bm25/query_milliseconds"} {
		if !(m[k] > 0) {
			t.Errorf("%s = %v, want > 0", k, m[k])
		}
	}
	// The TREC run on disk is the one evaluated.
	run, err := eval.ReadTREC(filepath.Join(runDir, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := data.Load(filepath.Join(dir, "data"), "test")
	again, _ := eval.Evaluate(run, ds.Qrels["test"], []string{"nDCG@10"})
	if d := again["nDCG@10"] - m["dense/nDCG@10"]; d > 1e-9 || d < -1e-9 {
		t.Errorf("TREC file scores %.6f, metrics.json %.6f", again["nDCG@10"], m["dense/nDCG@10"])
	}
}

func TestResumeEndsWithTheSameMetrics(t *testing.T) {
	for _, phase := range []string{"pretrain", "train"} {
		t.Run(phase, func(t *testing.T) {
			dir := testkit.NewSlice(t)
			rec := testkit.SmallRecipe(t, dir, "")
			full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			// Interrupt at step 33 (after the checkpoint at 20 and not on a multiple of 20),
			// as SIGINT would: the loop checkpoints the 33 completed steps and stops.
			broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: phase, InterruptAt: 33})
			if err == nil || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("interrupted run: err = %v", err)
			}
			if _, err := os.Stat(filepath.Join(broken, experiment.MetricsFile)); err == nil {
				t.Fatal("an interrupted run wrote metrics.json")
			}
			// A run killed later would have logged steps after its checkpoint, replayed on resume.
			logPath := filepath.Join(broken, experiment.LogFile)
			f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "{\"phase\":%q,\"step\":40,\"loss\":1}\n", phase)
			f.Close()
			resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, ResumeDir: broken})
			if err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(resumed, experiment.MetricsFile))
			again, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, ResumeDir: resumed})
			after, _ := os.ReadFile(filepath.Join(resumed, experiment.MetricsFile))
			if err != nil || again != resumed || string(before) != string(after) {
				t.Fatalf("resuming a finished run: err %v, dir %s, metrics.json changed: %v", err, again, string(before) != string(after))
			}
			got, _ := experiment.ReadMetrics(resumed)
			if got["train/seconds"] <= 0 || got["train/examples_per_second"] <= 0 {
				t.Errorf("resumed run: train/seconds %v, train/examples_per_second %v", got["train/seconds"], got["train/examples_per_second"])
			}
			testkit.SameMetrics(t, "", full, resumed, testkit.Quality)
			// The log was cut back to the checkpoint: every (phase, step) line once, as in
			// the uninterrupted run.
			if w, g := testkit.LogSteps(t, full), testkit.LogSteps(t, resumed); !slices.Equal(w, g) {
				t.Errorf("log.jsonl (phase, step) lines: resumed %v, uninterrupted %v", g, w)
			}
		})
	}
}

// TestResumeBeforeTheFirstCheckpoint: a run killed before its first checkpoint (simulated by
// removing the checkpoint its interruption wrote) resumes by starting its first phase again,
// and ends as the uninterrupted run does.
func TestResumeBeforeTheFirstCheckpoint(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := testkit.SmallRecipe(t, dir, "")
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "pretrain", InterruptAt: 15})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	entries, _ := os.ReadDir(broken)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "checkpoint") || e.Name() == "latest" {
			os.RemoveAll(filepath.Join(broken, e.Name()))
		}
	}
	var out strings.Builder
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no checkpoint yet; starting from the first phase") {
		t.Errorf("output does not say the run starts again:\n%s", out.String())
	}
	testkit.SameMetrics(t, "", full, resumed, testkit.Quality)
	if w, g := testkit.LogSteps(t, full), testkit.LogSteps(t, resumed); !slices.Equal(w, g) {
		t.Errorf("log.jsonl (phase, step) lines: resumed %v, uninterrupted %v", g, w)
	}
}

// TestRetrieverRefusesAListLoss: loss.name is read; a list loss cannot train a bi-encoder, and
// the run stops before it writes a run directory.
func TestRetrieverRefusesAListLoss(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := testkit.SmallRecipe(t, dir, "")
	rec.Loss.Name = "pointwise"
	_, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `loss.name = "pointwise"`) {
		t.Fatalf("err = %v, want loss.name refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Error("a run directory was created")
	}
}
