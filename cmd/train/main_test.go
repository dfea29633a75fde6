package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCollection writes a three-passage BEIR collection into dir, with the corpus lines given.
func writeCollection(t *testing.T, dir string, corpus, qrels string) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	files := map[string]string{
		"corpus.jsonl":    corpus,
		"queries.jsonl":   `{"_id": "1", "text": "wing flutter"}` + "\n" + `{"_id": "2", "text": "heat transfer"}` + "\n",
		"qrels/train.tsv": "query-id\tcorpus-id\tscore\n1\ta\t1\n2\tb\t1\n",
		"qrels/test.tsv":  qrels,
		"qrels/dev.tsv":   "query-id\tcorpus-id\tscore\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const goodCorpus = `{"_id": "a", "title": "wings", "text": "wing flutter at high speed"}
{"_id": "b", "title": "heat", "text": "heat transfer in a boundary layer"}
{"_id": "c", "title": "misc", "text": "something else entirely"}
`

const goodQrels = "query-id\tcorpus-id\tscore\n1\ta\t2\n2\tb\t1\n"

// testRecipe reads the test recipe testdata/<name>.toml without the comment lines it opens with.
func testRecipe(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for strings.HasPrefix(text, "#") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return text
}

// writeRecipe writes testdata/retriever-min.toml with extra appended to dir/recipe.toml.
func writeRecipe(t *testing.T, dir, extra string) string {
	t.Helper()
	p := filepath.Join(dir, "recipe.toml")
	text := testRecipe(t, "retriever-min") + extra
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBadInputIsOneLineNamingFileAndLine checks the three malformed inputs of the retriever
// issue: each ends the run with a one-line error naming the file and the line.
func TestBadInputIsOneLineNamingFileAndLine(t *testing.T) {
	cases := []struct {
		name, corpus, qrels, recipeExtra string
		want                             []string
	}{
		{"truncated JSON line", goodCorpus[:len(goodCorpus)-20] + "\n", goodQrels, "",
			[]string{"corpus.jsonl:3:", "JSON"}},
		{"qrels names an unknown document", goodCorpus, goodQrels + "2\tzz\t1\n", "",
			[]string{"test.tsv:4:", `"zz"`}},
		{"unknown recipe key", goodCorpus, goodQrels, "[train]\nstpes = 10\n",
			[]string{"recipe.toml:9:", "train.stpes"}},
		{"test qrels judge nothing relevant", goodCorpus, "query-id\tcorpus-id\tscore\n1\ta\t0\n2\tb\t0\n", "",
			[]string{"qrels/test.tsv: no query has a relevant document (2 rows, all scores <= 0)"}},
		{"a section the kind does not read", goodCorpus, goodQrels, "[selfrag]\ntop_k = 3\n",
			[]string{"recipe.toml:8:", `section [selfrag] is not read by kind "retriever"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCollection(t, filepath.Join(dir, "data"), c.corpus, c.qrels)
			err := run([]string{"-recipe", writeRecipe(t, dir, c.recipeExtra)})
			if err == nil {
				t.Fatal("run succeeded on bad input")
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
				entries, _ := os.ReadDir(filepath.Join(dir, "runs"))
				if len(entries) > 0 {
					t.Errorf("a run directory was created for a run that could not start: %v", entries)
				}
			}
		})
	}
}

func TestNoRecipeIsAnError(t *testing.T) {
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "-recipe") {
		t.Fatalf("err = %v, want a message about -recipe", err)
	}
}

func TestResumeRefusesADifferentRecipe(t *testing.T) {
	dir := t.TempDir()
	writeCollection(t, filepath.Join(dir, "data"), goodCorpus, goodQrels)
	recipe := writeRecipe(t, dir, "[train]\nsteps = 2\n[eval]\ndepth = 3\nmetrics = [\"nDCG@3\"]\n")
	runDir := filepath.Join(dir, "runs", "fake")
	os.MkdirAll(runDir, 0o755)
	rec, err := loadRecipe(recipe, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.WriteResolved(filepath.Join(runDir, "recipe.resolved.toml")); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRecipe(recipe, runDir); err != nil {
		t.Fatalf("the run's own recipe was refused: %v", err)
	}
	if _, err := loadRecipe("", runDir); err != nil {
		t.Fatalf("resume without -recipe: %v", err)
	}
	other := writeRecipe(t, dir, "[train]\nsteps = 3\n[eval]\ndepth = 3\nmetrics = [\"nDCG@3\"]\n")
	_, err = loadRecipe(other, runDir)
	if err == nil || !strings.Contains(err.Error(), "train.steps: 2 != 3") {
		t.Fatalf("err = %v, want it to name train.steps", err)
	}
	if _, err := loadRecipe("", filepath.Join(dir, "data")); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Fatalf("err = %v, want not a run directory", err)
	}
}
