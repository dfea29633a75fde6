package retriever

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestFineTuneFromStart is the pretrained-encoder flow on the Cranfield slice: a run trained
// from scratch is the start (model.init_from, architecture from its checkpoint); the
// fine-tuning run evaluates it zero-shot, mines negatives from BM25 and from its own dense
// ranking, chooses the checkpoint on dev, and resumes to the same numbers.
func TestFineTuneFromStart(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := testkit.NewSlice(t)
	start, err := experiment.Run(context.Background(), testkit.SmallRecipe(t, dir, ""), experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	startMetrics, err := experiment.ReadMetrics(start)
	if err != nil {
		t.Fatal(err)
	}
	// [model] is dropped from the slice recipe: hidden and encoder come from the start run.
	text := testkit.RecipeText(t, "slice", map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")})
	text = strings.Replace(text, "[model]\nencoder = \"bow\"\nhidden = 64\n", "[model]\ninit_from = \""+start+"\"\n", 1)
	text = strings.Replace(text, "[pretrain]\nsteps = 60", "[pretrain]\nsteps = 0", 1)
	text = strings.Replace(text, "[tokenizer]\ntrain = true\nvocab_size = 2000\n", "[tokenizer]\n", 1)
	text += "systems = [\"bm25\", \"zeroshot\", \"finetuned\", \"rrf\"]\nselect_metric = \"nDCG@10\"\n[sampler]\nnegative_source = \"bm25+dense\"\nhard_negatives = 2\n"
	path := filepath.Join(dir, "ft.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := testkit.RecipeFile(t, path)
	var out strings.Builder
	ft, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m, err := experiment.ReadMetrics(ft)
	if err != nil {
		t.Fatal(err)
	}
	// Zero-shot is the start model evaluated on the same split: its dense numbers.
	for _, k := range []string{"nDCG@10", "Recall@100"} {
		if m["zeroshot/"+k] != startMetrics["dense/"+k] {
			t.Errorf("zeroshot/%s = %v, the start run's dense/%s = %v", k, m["zeroshot/"+k], k, startMetrics["dense/"+k])
		}
	}
	if s := m["select/step"]; s != 20 && s != 40 && s != 60 {
		t.Errorf("select/step = %v, want one of the checkpoints 20, 40, 60", s)
	}
	for _, k := range []string{"finetuned/nDCG@10", "rrf/nDCG@10", "select/dev/nDCG@10"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %s", k)
		}
	}
	// Selection at the checkpoints (no train.eval_every) draws the curve too.
	if _, err := os.Stat(filepath.Join(ft, CurveFile)); err != nil {
		t.Errorf("selection at the checkpoints: %v", err)
	}
	for _, s := range []string{"init_from: from " + start, "hidden = 64", "zeroshot: encoded", "select: train step 20", "chosen on dev"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	// The mined examples: two negatives each, none judged relevant to its query.
	f, err := os.Open(filepath.Join(ft, ExamplesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		var ex struct {
			QueryID     string   `json:"query_id"`
			PositiveID  string   `json:"positive_id"`
			NegativeIDs []string `json:"negative_ids"`
			Negatives   []string `json:"negatives"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ex); err != nil {
			t.Fatal(err)
		}
		if len(ex.NegativeIDs) != 2 || len(ex.Negatives) != 2 {
			t.Errorf("example %d: %d negatives, want 2", n, len(ex.NegativeIDs))
		}
		n++
	}
	if n == 0 {
		t.Error("no training example written")
	}
	// Interrupted mid-train, between two selections, the resumed run ends with the same numbers.
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "train", InterruptAt: 30})
	if err == nil {
		t.Fatal("interrupted run: no error")
	}
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SameMetrics(t, "", ft, resumed, testkit.Quality)
}
