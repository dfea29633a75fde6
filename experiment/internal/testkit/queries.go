package testkit

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
)

// SplitQueries writes the queries of a split's qrels (those a run evaluates) as a BEIR
// queries.jsonl at path, in reverse order (a TREC file must not depend on the file's order).
func SplitQueries(t *testing.T, dataDir, split, path string) {
	t.Helper()
	ds, err := data.LoadJudged(dataDir, split)
	if err != nil {
		t.Fatal(err)
	}
	ids := ds.Qrels[split].QueryIDs()
	var b strings.Builder
	for i := len(ids) - 1; i >= 0; i-- {
		text, _ := ds.Queries.Text(ids[i])
		line, _ := json.Marshal(map[string]string{"_id": ids[i], "text": text})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ZeroSteps rewrites rec's file with train.steps and train.warmup_steps 0 (the lines
// "steps = N" and "warmup_steps = W" as the recipe writes them) and loads it: the run of the
// untrained model.
func ZeroSteps(t *testing.T, rec *configs.Recipe) *configs.Recipe {
	t.Helper()
	b, err := os.ReadFile(rec.Path)
	if err != nil {
		t.Fatal(err)
	}
	steps := regexp.MustCompile(`(?m)^steps = \d+$`)
	warm := regexp.MustCompile(`(?m)^warmup_steps = \d+$`)
	text := warm.ReplaceAllString(steps.ReplaceAllString(string(b), "steps = 0"), "warmup_steps = 0")
	out, err := LoadText(t, rec.Path, text)
	if err != nil {
		t.Fatal(err)
	}
	if out.Train.Steps != 0 || out.Train.WarmupSteps != 0 {
		t.Fatalf("%s: train.steps %d, warmup_steps %d after the rewrite", rec.Path, out.Train.Steps, out.Train.WarmupSteps)
	}
	return out
}
