package fusion

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// tinyRetroRecipe is a retro.only run over the rag tests' small garden world with tiny models:
// it checks the machinery (training, neighbours, evaluation, the swap, resume), not accuracy.
func tinyRetroRecipe(t *testing.T) *configs.Recipe {
	return tinyFusionRecipe(t, "[retro]\nonly = true\nseq_length = 32\nchunk = 4\nneighbour_length = 8\npretrain_steps = 6\npretrain_batch_size = 4\nfinetune_steps = 6\nfinetune_batch_size = 4\nreplay = 1\ncheckpoint_every = 3\n")
}

// TestRetroResumeExact interrupts RETRO's pretraining at step 4 (after its checkpoint at step
// 3) and the closed-book twin's fine-tuning at step 2 (before its first) and resumes: every
// phase's parameters are the uninterrupted run's bit for bit, and so are the metrics.
func TestRetroResumeExact(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	m, out := checkResumeExact(t, tinyRetroRecipe(t), []phaseStop{{"retro_pretrain", 4}, {"retro_closedbook_finetune", 2}},
		[]string{"retro/retro/pretrain", "retro/retro/finetune", "retro/retro_closedbook/pretrain", "retro/retro_closedbook/finetune"}, 6)
	for _, k := range []string{"retro/EM", "retro_closedbook/EM", "retro/EM.0", "retro_closedbook/EM.>=30", "retro/moved_new_town", "retro_closedbook/moved_new_town", "retro/moved_old_town", "cost/retro_bytes", "cost/retro/searches_per_question"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics lack %s", k)
		}
	}
	if m["cost/retro/searches_per_question"] < 1 || m["cost/retro_closedbook/searches_per_question"] != 0 {
		t.Errorf("searches per question: retro %g, closed-book %g", m["cost/retro/searches_per_question"], m["cost/retro_closedbook/searches_per_question"])
	}
	if !strings.Contains(out, "retro_closedbook") {
		t.Errorf("no table:\n%s", out)
	}
}

// TestRetroNeighbours: a corpus row's chunks never get a neighbour from the row's own documents
// (the paper's leakage rule), while the same search without the rule does find chunks of them
// (so the rule removes something); a neighbour is a database chunk with its continuation, at most
// retro.neighbour_length tokens, and the rows hold every document once, in order.
func TestRetroNeighbours(t *testing.T) {
	s, err := newRetroStudy(gardenRun(t, tinyRetroRecipe(t)))
	if err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, docs := range s.rowDocs {
		all = append(all, docs...)
	}
	if len(all) != len(s.docs) || !slices.IsSorted(all) || all[len(all)-1] != len(s.docs)-1 {
		t.Fatalf("rows hold %d documents, corpus %d", len(all), len(s.docs))
	}
	m, own := s.rc.Chunk, 0
	for i := 0; i < 60; i++ {
		row := s.rows[i]
		for c := 0; c < len(row)/m; c++ {
			for _, j := range s.db.search(row[c*m:(c+1)*m], s.rowDocs[i]) {
				if slices.Contains(s.rowDocs[i], s.db.doc[j]) {
					t.Fatalf("row %d chunk %d: neighbour from its own document %d", i, c, s.db.doc[j])
				}
				if n := s.db.nbr[j]; len(n) > s.rc.NeighbourLength || len(n) == 0 {
					t.Fatalf("neighbour of %d tokens", len(n))
				}
			}
			for _, j := range s.db.search(row[c*m:(c+1)*m], nil) {
				if slices.Contains(s.rowDocs[i], s.db.doc[j]) {
					own++
				}
			}
		}
	}
	if own == 0 {
		t.Error("no search without the rule found a chunk of the row's own documents")
	}
	nb := s.neighboursOf(0, s.rows[0], s.rowDocs[0])
	if len(nb) != len(s.rows[0])/m {
		t.Errorf("row 0: neighbours for %d chunks, want %d complete chunks", len(nb), len(s.rows[0])/m)
	}
	d0 := s.docs[0]
	if j := s.db.doc[0]; j != 0 || !slices.Equal(s.db.nbr[0], d0[:min(len(d0), s.rc.NeighbourLength)]) {
		t.Errorf("the first database chunk is %v of document %d, want document 0's first %d tokens", s.db.nbr[0], j, s.rc.NeighbourLength)
	}
}

func TestRetroConfigErrors(t *testing.T) {
	for _, extra := range []string{"chunk = 5", "neighbours = 0", "neighbour_length = 2", "seq_length = 4096", "replay = 64", "cca_from = -2"} {
		text := strings.Replace(testkit.RecipeText(t, "rag-small", nil), `kind = "rag"`, `kind = "fusion"`, 1) + "\n[retro]\n" + extra + "\n"
		if _, err := testkit.LoadText(t, filepath.Join(t.TempDir(), "bad.toml"), text); err == nil || !strings.Contains(err.Error(), "retro.") {
			t.Errorf("%s: err = %v, want one naming the retro key", extra, err)
		}
	}
	rec := tinyFusionRecipe(t, "only = true\n[retro]\nonly = true\n")
	if _, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard}); err == nil || !strings.Contains(err.Error(), "retro.only") {
		t.Errorf("fid.only and retro.only: err = %v", err)
	}
}
