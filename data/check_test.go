package data

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckJudged: a loaded split whose qrels judge nothing relevant is an error naming its
// file and row count; splits with a relevant document pass.
func TestCheckJudged(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"corpus.jsonl":    `{"_id": "a", "title": "", "text": "wing"}` + "\n" + `{"_id": "b", "title": "", "text": "heat"}` + "\n",
		"queries.jsonl":   `{"_id": "1", "text": "wing"}` + "\n" + `{"_id": "2", "text": "heat"}` + "\n",
		"qrels/train.tsv": "query-id\tcorpus-id\tscore\n1\ta\t1\n2\tb\t0\n",
		"qrels/test.tsv":  "query-id\tcorpus-id\tscore\n1\ta\t0\n2\tb\t-1\n2\ta\t0\n",
		"qrels/dev.tsv":   "query-id\tcorpus-id\tscore\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadJudged(dir, "train"); err != nil {
		t.Errorf("train judges a relevant document: %v", err)
	}
	_, err := LoadJudged(dir, "train", "test")
	want := filepath.Join(dir, "qrels", "test.tsv") + ": no query has a relevant document (3 rows, all scores <= 0)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, err = LoadJudged(dir, "dev")
	if err == nil || !strings.Contains(err.Error(), "dev.tsv: no query has a relevant document (no judgement rows") {
		t.Errorf("header-only qrels: err = %v", err)
	}
	// Load itself does not judge.
	if _, err := Load(dir, "test"); err != nil {
		t.Errorf("Load: %v", err)
	}
}
