package retriever

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestDenseRefreshSlice trains the slice recipe with sampler.negative_source = "dense_refresh",
// refresh_every = 20 and both false-negative filters: the negatives are re-mined exactly at
// train steps 0, 20 and 40 (log.jsonl "mining": "refresh" lines and MiningDir files, each mined
// with the index of its own step), every batch records the one index version it was dealt from
// (the latest refresh at or before its step), metrics.json's mining/dropped_* are the sums of
// the refreshes' counts, and a run interrupted between two refreshes and resumed (reading the
// examples of step 20 back) ends with the same numbers.
func TestDenseRefreshSlice(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := func() *configs.Recipe {
		r := testkit.SmallRecipe(t, dir, "[sampler]\nnegative_source = \"dense_refresh\"\nrefresh_every = 20\nnegative_margin = 0.02\nnegative_relative = 0.95\nhard_negatives = 2\n")
		r.Pretrain.Steps = 0
		return r
	}
	full, err := experiment.Run(context.Background(), rec(), experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(full, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	var refreshes []int
	var margin, relative float64
	batches := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Mining          string  `json:"mining"`
			Step            int     `json:"step"`
			IndexStep       int     `json:"index_step"`
			IndexHash       string  `json:"index_hash"`
			DroppedMargin   float64 `json:"dropped_margin"`
			DroppedRelative float64 `json:"dropped_relative"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		switch l.Mining {
		case "refresh":
			refreshes = append(refreshes, l.Step)
			margin, relative = margin+l.DroppedMargin, relative+l.DroppedRelative
			if l.IndexStep != l.Step || l.IndexHash == "" {
				t.Errorf("refresh at step %d mined with the index of step %d (hash %q)", l.Step, l.IndexStep, l.IndexHash)
			}
			f, err := readMining(miningPath(full, l.Step))
			if err != nil || f.IndexStep != l.Step || f.IndexHash != l.IndexHash || len(f.Examples) == 0 {
				t.Errorf("%s: %+v, %v", miningPath(full, l.Step), f.IndexStep, err)
			}
		case "batch":
			if l.Step != batches {
				t.Errorf("batch line of step %d, want %d", l.Step, batches)
			}
			batches++
			if want := l.Step - l.Step%20; l.IndexStep != want {
				t.Errorf("batch %d dealt from the index of step %d, want %d", l.Step, l.IndexStep, want)
			}
		}
	}
	if len(refreshes) != 3 || refreshes[0] != 0 || refreshes[1] != 20 || refreshes[2] != 40 || batches != 60 {
		t.Fatalf("refreshes at steps %v and %d batch lines, want [0 20 40] and 60", refreshes, batches)
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dropped by margin %v, by ratio %v; dense nDCG@10 %.4f", m["mining/dropped_margin"], m["mining/dropped_relative"], m["dense/nDCG@10"])
	if m["mining/dropped_margin"] != margin || m["mining/dropped_relative"] != relative || m["mining/refreshes"] != 3 {
		t.Errorf("metrics mining/*: %v %v %v, log sums %v %v over 3 refreshes", m["mining/dropped_margin"], m["mining/dropped_relative"], m["mining/refreshes"], margin, relative)
	}
	if margin+relative == 0 {
		t.Error("the filters dropped nothing on the slice")
	}
	broken, err := experiment.Run(context.Background(), rec(), experiment.Options{Progress: io.Discard, InterruptPhase: "train", InterruptAt: 30})
	if err == nil {
		t.Fatal("interrupted run: no error")
	}
	resumed, err := experiment.Run(context.Background(), rec(), experiment.Options{Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SameMetrics(t, "", full, resumed, testkit.Quality)
}
