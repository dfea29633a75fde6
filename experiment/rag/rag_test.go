package rag

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// smallRAGRecipe is a kind = "rag" recipe over a small garden world, small enough to run end to
// end in a test: a 1-layer reader that learns to read from counterfactual contexts (no language
// model pretraining), a bag-of-words retriever warmed up by cropping, and short joint training.
func smallRAGRecipe(t *testing.T, extra string) *configs.Recipe {
	t.Helper()
	return testkit.Recipe(t, "rag-small", filepath.Join(t.TempDir(), "rag-small.toml"), nil, extra)
}

// TestRAGJointRecallRises runs a small rag recipe end to end: joint training with either
// objective raises the dense retriever's Recall@1 of the question's entry over its starting
// point, though no passage label is used; the reader over the gold entry reads.
func TestRAGJointRecallRises(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := smallRAGRecipe(t, "")
	var out strings.Builder
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := m["dense/Recall@1"]
	for _, obj := range []string{"rag_sequence", "rag_token"} {
		after := m["dense+"+obj+"/Recall@1"]
		if !(after > before+0.05) {
			t.Errorf("%s: dense Recall@1 %.3f -> %.3f, want a rise", obj, before, after)
		}
	}
	if m["gold_entry/EM"] < 0.9 {
		t.Errorf("reader over the gold entry: EM %.3f", m["gold_entry/EM"])
	}
	for _, f := range []string{"world/questions.jsonl", "world/datastore/entry/corpus.jsonl",
		"world-updated/questions.jsonl", "world-updated/datastore/entry/corpus.jsonl",
		"world-poisoned/questions.jsonl", "world-poisoned/datastore/entry/corpus.jsonl",
		"tokenizer.json", "metrics.json", "latest",
		"runs/test.dense.trec", "runs/test.dense+rag_token.trec"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestRAGResume interrupts a small rag run in its second objective (after its checkpoint at
// step 30; the interruption checkpoints step 46) and
// resumes it, and stops another before its start is saved (in reader fine-tuning, whose phase
// keeps no mid-phase checkpoint) and resumes that: both end with the metrics, TREC runs and
// log lines of the uninterrupted run.
func TestRAGResume(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := smallRAGRecipe(t, "")
	rec.Reader.FinetuneSteps, rec.Train.CheckpointEvery = 100, 30
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range []struct {
		phase string
		at    int
		says  []string // what the resumed run prints
	}{
		{"rag_token", 45, []string{"resume: the start in", "rag_sequence: finished in an earlier segment", "checkpoint-rag_token-46 at step 46"}},
		{"reader_finetune", 50, []string{"no saved start yet; starting from the first phase"}},
	} {
		broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: stop.phase, InterruptAt: stop.at})
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Fatalf("%s: interrupted run: err = %v", stop.phase, err)
		}
		var out strings.Builder
		resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
		if err != nil {
			t.Fatalf("%s: %v\n%s", stop.phase, err, out.String())
		}
		for _, say := range stop.says {
			if !strings.Contains(out.String(), say) {
				t.Errorf("%s: the resumed run does not print %q:\n%s", stop.phase, say, out.String())
			}
		}
		testkit.SameRunDir(t, stop.phase+": ", full, resumed)
	}
}
