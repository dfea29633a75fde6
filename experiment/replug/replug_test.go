package replug

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
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
