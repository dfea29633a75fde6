package replug

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
	"github.com/ragtrain/ragtrain/trainer"
)

// TestReplugRecallRises trains the retriever by RePlug from the frozen reader, no passage label
// used: dense Recall@1 of the question's entry rises over the starting retriever's.
func TestReplugRecallRises(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := testkit.StudyRecipe(t, "replug", `[replug]
systems = ["replug"]
steps = 100
batch_size = 12
top_k = 8
lr = 5e-4
tau_lm = 3.0
`)
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
	before, after := m["dense/Recall@1"], m["dense+replug/Recall@1"]
	if !(after > before+0.05) {
		t.Errorf("RePlug: dense Recall@1 %.3f -> %.3f, want a rise of > 0.05", before, after)
	}
	// The reader is frozen: each (question, passage) pair is scored once, later steps hit the cache.
	if m["replug/reader_cache_hits"] == 0 || m["replug/reader_scored"] == 0 {
		t.Errorf("reader scored %v pairs, %v cache hits", m["replug/reader_scored"], m["replug/reader_cache_hits"])
	}
}

// TestReplugBothTowersRefreshes trains both towers by RePlug: the passage tower trains in the
// graph, so the index is refreshed (sync, every 4 steps) and every step logs the version it
// searched.
func TestReplugBothTowersRefreshes(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := testkit.TinyStudyRecipe(t, "replug", `[replug]
systems = ["replug"]
towers = "both"
steps = 12
batch_size = 8
top_k = 3
[index_refresh]
mode = "sync"
refresh_every = 4
`)
	var out strings.Builder
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	start, err := checkpoints.Load(filepath.Join(dir, ragkit.StudyStartDir))
	if err != nil {
		t.Fatal(err)
	}
	final, err := checkpoints.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	changed := func(prefix string) bool {
		for i, p := range final.Params {
			if strings.HasPrefix(p.Name, prefix) && !slices.Equal(p.Data, start.Params[i].Data) {
				return true
			}
		}
		return false
	}
	if !changed("passage.") || !changed("query.") || changed("reader.") {
		t.Errorf("changed: passage tower %t, query tower %t, reader %t; want both towers and not the reader",
			changed("passage."), changed("query."), changed("reader."))
	}
	steps := 0
	for _, l := range testkit.ReadLog(t, dir) {
		if l.Phase == "replug" && l.IndexStep != nil {
			if *l.IndexStep != 4*(l.Step/4) {
				t.Errorf("step %d searched the index of step %d", l.Step, *l.IndexStep)
			}
			steps++
		}
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if steps != 12 || m["replug/refreshes"] != 2 {
		t.Errorf("%d steps logged, %v refreshes; want 12 and 2", steps, m["replug/refreshes"])
	}
}

// TestReplugResume interrupts the RePlug phase of a small run (after its checkpoint at step 10;
// the interruption checkpoints step 15) and resumes it: the checkpoint holds the reader's cache
// and its counters, and the resumed run ends with the metrics of the uninterrupted one, the
// reader's cache hits and scored pairs included, its TREC runs and its log lines.
func TestReplugResume(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := testkit.TinyStudyRecipe(t, "replug", `[replug]
systems = ["replug"]
steps = 30
batch_size = 8
top_k = 3
[realm]
checkpoint_every = 10
`)
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	hits, scored := m["replug/reader_cache_hits"], m["replug/reader_scored"]
	if hits == 0 || scored == 0 || hits+scored != 30*8*3 {
		t.Fatalf("reader scored %v pairs, %v cache hits; want both > 0, %d in all", scored, hits, 30*8*3)
	}
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "replug", InterruptAt: 14})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupted run: err = %v", err)
	}
	ck, err := checkpoints.Load(broken)
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Trainer.Counters
	if ck.Trainer.Phase != "replug" || ck.Trainer.Step != 15 || c["reader_cache_hits"]+c["reader_scored"] != 15*8*3 || c["reader_cache_hits"] == 0 {
		t.Fatalf("latest checkpoint: %s step %d, counters %v; want replug step 15, %d lookups, some hits", ck.Trainer.Phase, ck.Trainer.Step, c, 15*8*3)
	}
	if len(ck.State) != 3 {
		t.Fatalf("checkpoint state: %d tensors, want the cache's keys, log-likelihoods and reader hash", len(ck.State))
	}
	var out strings.Builder
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "checkpoint-replug-15 at step 15") {
		t.Errorf("the resumed run does not say it continues at step 15:\n%s", out.String())
	}
	testkit.SameRunDir(t, "", full, resumed)
	mr, err := experiment.ReadMetrics(resumed)
	if err != nil {
		t.Fatal(err)
	}
	if mr["replug/reader_cache_hits"] != hits || mr["replug/reader_scored"] != scored {
		t.Errorf("resumed: %v cache hits, %v scored; uninterrupted %v, %v", mr["replug/reader_cache_hits"], mr["replug/reader_scored"], hits, scored)
	}
}
