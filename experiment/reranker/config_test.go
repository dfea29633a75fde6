package reranker

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// configFixture returns a directory holding the Cranfield slice in data/ (testkit.NewSlice),
// a tokenizer file tok.json and a run directory runs/r1, the paths the recipes below name.
func configFixture(t *testing.T) string {
	t.Helper()
	dir := testkit.NewSlice(t)
	if err := os.MkdirAll(filepath.Join(dir, "runs", "r1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tok.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConfig loads [rerank] through the kind's registration: its documented defaults, its paths
// resolved against the recipe's directory (a run directory or a TREC run file), the smallest
// valid lists, and impossible values refused with the file, line and key.
func TestConfig(t *testing.T) {
	dir := configFixture(t)
	const base = "\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n"
	load := func(name, text string) (*configs.Recipe, error) {
		return testkit.LoadText(t, filepath.Join(dir, name), text)
	}
	r, err := load("minimal.toml", "kind = \"reranker\""+base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"rerank.first_stage", Of(r).FirstStage, "bm25"},
		{"rerank.candidates", Of(r).Candidates, 100},
		{"rerank.list_size", Of(r).ListSize, 8},
		{"rerank.train_depth", Of(r).TrainDepth, 30},
		{"rerank.losses", Of(r).Losses, []string{"pairwise", "listwise", "pointwise"}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %v, want %v", c.key, c.got, c.want)
		}
	}
	// Paths two directories below the inputs: a run directory, and a TREC run file.
	r, err = load("recipes/sub/x.toml", "kind = \"reranker\"\n[data]\ndir = \"../../data\"\n[tokenizer]\ntrain = true\n[rerank]\nfirst_stage = \"../../runs/r1\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Of(r).FirstStage, filepath.Join(dir, "runs", "r1"); got != want {
		t.Errorf("rerank.first_stage = %q, want %q", got, want)
	}
	r, err = load("file.toml", "kind = \"reranker\"\n[rerank]\nfirst_stage = \"tok.json\"\ntrain_depth = 50\n"+base)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "tok.json"); Of(r).FirstStage != want || Of(r).TrainDepth != 50 {
		t.Errorf("first_stage %q, train_depth %d; want %q, 50", Of(r).FirstStage, Of(r).TrainDepth, want)
	}
	if _, err := load("edges.toml", "kind = \"reranker\"\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[rerank]\ncandidates = 2\nlist_size = 2\n"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, text string
		raw        bool   // do not append base
		want       string // the error must hold "<file>" + want
	}{
		{"list above candidates", "kind = \"reranker\"\n[rerank]\ncandidates = 4\n", false, `:3: rerank.candidates: rerank.list_size = 8 exceeds rerank.candidates = 4`},
		{"rerank loss unknown", "kind = \"reranker\"\n[rerank]\nlosses = [\"hinge\"]\n", false, `:3: rerank.losses: unknown value "hinge", want one of "pairwise", "listwise" or "pointwise"`},
		{"rerank losses empty", "kind = \"reranker\"\n[rerank]\nlosses = []\n", false, `:3: rerank.losses: must name at least one of "pairwise", "listwise" or "pointwise"`},
		{"rerank train_depth 0", "kind = \"reranker\"\n[rerank]\ntrain_depth = 0\n", false, `:3: rerank.train_depth: must be >= 1, got 0`},
		{"interpolate without dev", "kind = \"reranker\"\n[data]\ndir = \"data\"\ndev_split = \"\"\n[tokenizer]\ntrain = true\n", true,
			`:4: data.dev_split: rerank.interpolate chooses alpha on data.dev_split, which is empty`},
		{"first stage missing", "kind = \"reranker\"\n[rerank]\nfirst_stage = \"dense\"\n", false, `:3: rerank.first_stage: not "bm25" and not a run directory: stat ` + filepath.Join(dir, "dense") + `: no such file`},
		{"misspelt key", "kind = \"reranker\"\n[rerank]\ncandidate = 4\n", false, `:3: unknown key "rerank.candidate" (did you mean "rerank.candidates"?)`},
	} {
		text := c.text
		if !c.raw {
			text += base
		}
		if _, err := load("case.toml", text); err == nil || !strings.Contains(err.Error(), "case.toml"+c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestDocTable: doc.go documents every [rerank] key with its default.
func TestDocTable(t *testing.T) {
	c := defaultConfig()
	testkit.DocTable(t, "rerank.", &c)
}
