package retriever

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index"
)

// TestTeacherBM25Weight: with loss.teacher_bm25_weight beta the teacher's score of a pair is
// the cross-encoder's plus beta times the pair's BM25 score as the BM25 system ranks it; a
// passage sharing no term with the query keeps the cross-encoder's score; beta = 0 is the
// cross-encoder alone.
func TestTeacherBM25Weight(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("corpus.jsonl", `{"_id": "d1", "title": "", "text": "apple pie with apple"}
{"_id": "d2", "title": "", "text": "banana bread"}
{"_id": "d3", "title": "", "text": "apple juice and orange"}
{"_id": "d4", "title": "", "text": "granite rock"}
`)
	write("queries.jsonl", `{"_id": "q1", "text": "apple pie"}
`)
	write("qrels/train.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
	ds, err := data.Load(dir, "train")
	if err != nil {
		t.Fatal(err)
	}
	passages := make([]string, ds.Corpus.Len())
	for i := range passages {
		passages[i] = ds.Corpus.Passage(i, false)
	}
	bm25 := index.NewBM25(ds.Corpus.IDs, passages, index.DefaultBM25Params())
	ranked := map[string]float64{}
	for _, h := range bm25.Search("apple pie", 10) {
		ranked[h.DocID] = h.Score
	}
	if len(ranked) != 2 || ranked["d1"] <= ranked["d3"] || ranked["d3"] <= 0 {
		t.Fatalf("BM25 of the toy corpus: %v (want d1 > d3 > 0, d2 and d4 unranked)", ranked)
	}
	pairs := [][2]string{{"q1", "d1"}, {"q1", "d2"}, {"q1", "d3"}}
	ce := map[[2]string]float32{pairs[0]: 1.5, pairs[1]: 2.5, pairs[2]: -0.5}
	const beta = 0.25
	add, err := pairBM25(bm25, ds, pairs, beta)
	if err != nil {
		t.Fatal(err)
	}
	ts := &teacherScores{scores: ce, bm25: add}
	for _, p := range pairs {
		got, err := ts.score(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		if want := ce[p] + float32(beta*ranked[p[1]]); got != want {
			t.Errorf("%v: teacher score %v, want ce %v + %v x bm25 %v = %v", p, got, ce[p], beta, ranked[p[1]], want)
		}
	}
	if got, _ := ts.score("q1", "d2"); got != 2.5 {
		t.Errorf("d2 shares no term with the query: score %v, want the cross-encoder's 2.5", got)
	}
	alone := &teacherScores{scores: ce}
	if got, _ := alone.score("q1", "d1"); got != 1.5 {
		t.Errorf("beta 0: score %v, want the cross-encoder's 1.5", got)
	}
	if _, err := pairBM25(bm25, ds, [][2]string{{"q9", "d1"}}, beta); err == nil {
		t.Error("a pair of an unknown query: no error")
	}
}
