package atlas

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/trainer"
)

// tinyAtlas is a kind = "atlas" recipe over the tiny study world (machinery, not accuracy).
func tinyAtlas(t *testing.T, systems string) string {
	return `[atlas]
systems = ` + systems + `
steps = 20
batch_size = 8
top_k = 3
bm25_depth = 5
score_batch = 16
[realm]
checkpoint_every = 5
[index_refresh]
mode = "async"
refresh_every = 5
swap_after = 1
`
}

// TestAtlasEveryObjective runs each objective once with each tower setting: every system is
// trained, evaluated on dev and test, and in the summary table; the "_both" systems refresh.
func TestAtlasEveryObjective(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := testkit.TinyStudyRecipe(t, "atlas", tinyAtlas(t, `["attention_query", "emdr2_both", "perplexity_query", "loo_both"]`))
	Of(rec).Steps = 8
	var out strings.Builder
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"attention_query", "emdr2_both", "perplexity_query", "loo_both"} {
		for _, k := range []string{"dense+" + p + "/Recall@1", "dev/dense+" + p + "/Recall@1", p + "_top1/EM", p + "/train_seconds"} {
			if v, ok := m[k]; !ok || math.IsNaN(v) {
				t.Errorf("metrics.json: %s = %v (present %t)", k, v, ok)
			}
		}
		if strings.HasSuffix(p, "_both") != (m[p+"/refreshes"] > 0) {
			t.Errorf("%s: %v refreshes", p, m[p+"/refreshes"])
		}
	}
	if !strings.Contains(out.String(), "summary (test questions") || !strings.Contains(out.String(), "closed-book reader") {
		t.Errorf("no summary table in the output:\n%s", out.String())
	}
}

// TestAtlasResumeMidStudy interrupts the study in its second system (the first finished, the
// second with both towers and an async refresh) and resumes it: the run ends exactly as an
// uninterrupted one (metrics, TREC runs, log steps).
func TestAtlasResumeMidStudy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := testkit.TinyStudyRecipe(t, "atlas", tinyAtlas(t, `["perplexity_query", "loo_both"]`))
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "loo_both", InterruptAt: 12})
	if !errors.Is(err, trainer.ErrInterrupted) {
		t.Fatalf("interrupted run: err = %v", err)
	}
	ck, err := checkpoints.Load(broken)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Trainer.Phase != "loo_both" || ck.Trainer.Step != 13 {
		t.Fatalf("latest checkpoint: %s step %d, want loo_both step 13", ck.Trainer.Phase, ck.Trainer.Step)
	}
	var out strings.Builder
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	for _, want := range []string{"perplexity_query: finished in an earlier segment", "at step 13"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("resumed output lacks %q:\n%s", want, out.String())
		}
	}
	testkit.SameRunDir(t, "", full, resumed)
}
