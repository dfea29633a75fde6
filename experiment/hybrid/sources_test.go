package hybrid

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data"
)

// TestReadRunErrors: each malformed source file fails with one error naming the file and, where
// there is one, the line.
func TestReadRunErrors(t *testing.T) {
	corpus, err := data.LoadCorpus("testdata/tiny/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	qids := []string{"q4", "q5"}
	good := "q4 Q0 d4 1 0.7 x\nq4 Q0 d1 2 0.2 x\nq5 Q0 d6 1 0.8 x\n"
	for _, c := range []struct{ name, text, want string }{
		{"unknown query", good + "q9 Q0 d1 1 0.5 x\n", "bad.trec:4: query id \"q9\" (field 1) is not a query of this split's qrels"},
		{"NaN score", "q4 Q0 d4 1 NaN x\nq5 Q0 d6 1 0.8 x\n", `bad.trec:1: run: score "NaN" is not a finite number`},
		{"duplicate doc", good + "q4 Q0 d4 3 0.1 x\n", `bad.trec:4: run: query "q4" lists doc "d4" again (first on line 1)`},
		{"doc not in corpus", "q4 Q0 d4 1 0.7 x\nq5 Q0 d99 1 0.8 x\n", `bad.trec:2: doc id "d99" (field 3) is not in the corpus`},
		{"missing query", "q4 Q0 d4 1 0.7 x\n", `bad.trec: no line for query "q5" of the split`},
		{"rising score", "q4 Q0 d4 1 0.2 x\nq4 Q0 d1 2 0.7 x\nq5 Q0 d6 1 0.8 x\n", `bad.trec:2: query "q4": score 0.7 (field 5) of rank 2 is above rank 1's 0.2`},
		{"five fields", "q4 Q0 d4 1 0.7\n", "bad.trec:1: run: want 6 fields"},
	} {
		path := filepath.Join(dir, "bad.trec")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadRun(path, qids, corpus, 10)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	path := filepath.Join(dir, "good.trec")
	os.WriteFile(path, []byte(good), 0o644)
	r, err := ReadRun(path, qids, corpus, 10)
	if err != nil || len(r["q4"]) != 2 || r["q4"][1].DocID != "d1" {
		t.Errorf("good file: %v %v", r, err)
	}
	// sizes: two hits for q4 when max_hits is 1; a file above 2 queries x 1 hit x 256 bytes is
	// refused from its size, before it is read
	if _, err := ReadRun(path, qids, corpus, 1); err == nil || !strings.Contains(err.Error(), `query "q4" has 2 hits, above hybrid.max_hits = 1`) {
		t.Errorf("max_hits: err = %v", err)
	}
	big := filepath.Join(dir, "big.trec")
	os.WriteFile(big, []byte(good+strings.Repeat("\n", 600)), 0o644)
	if _, err := ReadRun(big, qids, corpus, 1); err == nil || !strings.Contains(err.Error(), "above the 512 of 2 queries x hybrid.max_hits 1 x 256 bytes a line") {
		t.Errorf("size: err = %v", err)
	}
	if _, err := ReadRun(filepath.Join(dir, "absent.trec"), qids, corpus, 10); err == nil || !strings.Contains(err.Error(), "absent.trec") {
		t.Errorf("missing file: err = %v", err)
	}
}

// TestLatestRun: "latest:NAME" is the newest finished NAME-YYYYMMDD-HHMMSS[-N]: not an
// unfinished newer one, not another recipe's whose name extends NAME, and -N counts numerically.
func TestLatestRun(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, finished bool) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		if finished {
			os.WriteFile(filepath.Join(dir, name, "metrics.json"), []byte("{}\n"), 0o644)
		}
	}
	mk("m-20260101-000000", true)
	mk("m-20260101-000000-2", true)
	mk("m-20260101-000000-10", true)
	mk("m-20260102-000000", false)
	mk("m-colbert-20270101-000000", true)
	got, err := latestRun(dir, "m")
	if err != nil || got != filepath.Join(dir, "m-20260101-000000-10") {
		t.Errorf("latest m = %q %v, want m-20260101-000000-10", got, err)
	}
	if _, err := latestRun(dir, "x"); err == nil || !strings.Contains(err.Error(), "no finished run x-YYYYMMDD-HHMMSS") {
		t.Errorf("latest x: err = %v", err)
	}
}

// TestSourceCosts: the keys each kind reports its costs under.
func TestSourceCosts(t *testing.T) {
	m := map[string]float64{"colbert_plaid/total_bytes": 100, "colbert_plaid/query_milliseconds": 3, "train/seconds": 50,
		"splade/query_encode_ms": 2, "splade/query_search_ms": 0.5}
	if c := sourceCosts(m, "colbert_plaid"); !c.HasIndex || c.IndexBytes != 100 || c.QueryMS != 3 || c.TrainSeconds != 50 {
		t.Errorf("colbert_plaid: %+v", c)
	}
	m["colbert_plaid/query_encode_ms"] = 20 // a run that times the lone query's encoding apart
	if c := sourceCosts(m, "colbert_plaid"); c.QueryMS != 23 {
		t.Errorf("colbert_plaid with its encoding: %+v, want 3 + 20 ms", c)
	}
	delete(m, "colbert_plaid/query_encode_ms")
	if c := sourceCosts(m, "splade"); c.HasIndex || c.QueryMS != 2.5 || !c.HasTrain {
		t.Errorf("splade: %+v", c)
	}
	if c := sourceCosts(m, "bm25"); !c.HasTrain || c.TrainSeconds != 0 || c.HasQuery {
		t.Errorf("bm25: %+v", c)
	}
	if s := sumCosts([]Costs{sourceCosts(m, "colbert_plaid"), sourceCosts(m, "bm25")}); s.HasIndex || s.TrainSeconds != 50 {
		t.Errorf("sum: %+v (index unknown for bm25, train 50 + 0)", s)
	}
}
