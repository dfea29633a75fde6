package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ragtrain/ragtrain/eval"
)

const (
	testGold  = "../../eval/testdata/scifact/claims.jsonl"
	testPreds = "../../eval/testdata/scifact/preds.jsonl"
)

// TestOfficialAgrees runs SciFact's official script (official/, verbatim) on eval's hand-made
// test predictions and requires our figures to 1e-12. It skips without a Python that has pandas
// ($PYTHON, else the repository's .venv); check.sh does the same on five systems over the real
// test claims.
func TestOfficialAgrees(t *testing.T) {
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "../../.venv/bin/python"
	}
	if err := exec.Command(py, "-c", "import pandas").Run(); err != nil {
		t.Skipf("no Python with pandas at %s (set PYTHON): %v", py, err)
	}
	gold, err := eval.ReadSciFactGold(testGold)
	if err != nil {
		t.Fatal(err)
	}
	// The official reader looks up each cited doc in the corpus; nothing else of it is used.
	dir := t.TempDir()
	corpus, err := os.Create(filepath.Join(dir, "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(corpus)
	for _, id := range []int{31715818, 14717500, 18174210, 5956380, 4414547} {
		enc.Encode(map[string]any{"doc_id": id, "title": "t" + strconv.Itoa(id), "abstract": []string{"s"}})
	}
	corpus.Close()
	out := filepath.Join(dir, "official.json")
	cmd := exec.Command(py, "-W", "ignore", "official/verisci/evaluate/pipeline.py", "--gold", testGold,
		"--corpus", corpus.Name(), "--prediction", testPreds, "--output", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("official script: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var off map[string]map[string]float64
	if err := json.Unmarshal(b, &off); err != nil {
		t.Fatal(err)
	}
	m, err := score(testGold, testPreds)
	if err != nil {
		t.Fatal(err)
	}
	if m.Claims != len(gold) {
		t.Fatalf("%d claims scored, want %d", m.Claims, len(gold))
	}
	for name, got := range map[string]eval.PRF{"abstract_label_only": m.AbstractLabelOnly,
		"abstract_rationalized": m.AbstractRationalized, "sentence_selection": m.SentenceSelection,
		"sentence_label": m.SentenceLabel} {
		o, ok := off[name]
		if !ok {
			t.Fatalf("official output lacks %s: %s", name, b)
		}
		for k, v := range map[string]float64{"precision": got.Precision, "recall": got.Recall, "f1": got.F1} {
			if math.Abs(v-o[k]) > 1e-12 {
				t.Errorf("%s %s: ours %.17g, official %.17g", name, k, v, o[k])
			}
		}
	}
	// Not a trivial agreement: the case mixes zero and non-zero credit.
	if m.AbstractRationalized.F1 <= 0 || m.AbstractRationalized.F1 >= m.AbstractLabelOnly.F1 {
		t.Errorf("figures %+v do not exercise the rationale check", m)
	}
}

func TestScoreNamesBadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.jsonl")
	os.WriteFile(p, []byte(`{"id": 99, "evidence": {}}`+"\n"), 0o644)
	if _, err := score(testGold, p); err == nil || err.Error() != "eval: "+p+":1: id: claim 99 is not a gold claim" {
		t.Errorf("error %v", err)
	}
}
