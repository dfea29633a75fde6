package eval_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
)

// collection is a BEIR directory read by the small readers below (package data is not
// imported, so this test stands alone).
type collection struct {
	ids, texts []string          // passage = title + " " + text, as the Lucene runs indexed it
	queries    map[string]string // query id -> text
}

func readJSONL(t *testing.T, path string, each func(line []byte) error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		if err := each(sc.Bytes()); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func readCollection(t *testing.T, dir string) collection {
	c := collection{queries: map[string]string{}}
	readJSONL(t, filepath.Join(dir, "corpus.jsonl"), func(line []byte) error {
		var d struct {
			ID    string `json:"_id"`
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		err := json.Unmarshal(line, &d)
		c.ids, c.texts = append(c.ids, d.ID), append(c.texts, d.Title+" "+d.Text)
		return err
	})
	readJSONL(t, filepath.Join(dir, "queries.jsonl"), func(line []byte) error {
		var q struct {
			ID   string `json:"_id"`
			Text string `json:"text"`
		}
		err := json.Unmarshal(line, &q)
		c.queries[q.ID] = q.Text
		return err
	})
	return c
}

func readQrels(t *testing.T, path string) map[string]map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	qrels := map[string]map[string]int{}
	for n, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("%s:%d: want 3 fields", path, n+2)
		}
		score, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("%s:%d: score: %v", path, n+2, err)
		}
		if qrels[f[0]] == nil {
			qrels[f[0]] = map[string]int{}
		}
		qrels[f[0]][f[1]] = score
	}
	return qrels
}

var metrics = []string{"nDCG@10", "MRR@10", "Recall@100", "P@10", "MAP"}

// The anchor figures of Lucene 4.10.4 BM25 (k1 1.2, b 0.75, EnglishAnalyzer, depth 1000),
// from the README beside the reference runs.
var luceneAnchors = []struct {
	coll, split string
	want        map[string]float64
}{
	{"cranfield", "test", map[string]float64{"nDCG@10": 0.3510, "MRR@10": 0.5193, "Recall@100": 0.6951, "P@10": 0.2320, "MAP": 0.2829}},
	{"cranfield", "all", map[string]float64{"nDCG@10": 0.3631, "MRR@10": 0.5181, "Recall@100": 0.7363, "P@10": 0.2329, "MAP": 0.3007}},
	{"cisi", "test", map[string]float64{"nDCG@10": 0.3744, "MRR@10": 0.6052, "Recall@100": 0.4574, "P@10": 0.3346, "MAP": 0.2238}},
	{"cisi", "all", map[string]float64{"nDCG@10": 0.3682, "MRR@10": 0.5990, "Recall@100": 0.4402, "P@10": 0.3382, "MAP": 0.2095}},
}

// inRankOrder replaces every score by a value decreasing with the position in the list, so
// that an evaluation keeps the list order even where scores tie.
func inRankOrder(run eval.Run) eval.Run {
	out := eval.Run{}
	for q, hits := range run {
		ranked := make([]index.Hit, len(hits))
		for i, h := range hits {
			ranked[i] = index.Hit{DocID: h.DocID, Score: float64(len(hits) - i)}
		}
		out[q] = ranked
	}
	return out
}

// inLuceneOrder sorts each list as Lucene's TopScoreDocCollector does: float32 score
// descending, ties by internal document number (the position in the corpus) ascending.
func inLuceneOrder(run eval.Run, ids []string) eval.Run {
	pos := map[string]int{}
	for i, id := range ids {
		pos[id] = i
	}
	out := eval.Run{}
	for q, hits := range run {
		sorted := slices.Clone(hits)
		slices.SortStableFunc(sorted, func(a, b index.Hit) int {
			if sa, sb := float32(a.Score), float32(b.Score); sa != sb {
				return cmp.Compare(sb, sa)
			}
			return pos[a.DocID] - pos[b.DocID]
		})
		out[q] = sorted
	}
	return inRankOrder(out)
}

// check compares metric values with the README's 4-decimal figures.
func check(t *testing.T, what string, got, want map[string]float64, tol float64, skip ...string) {
	t.Helper()
	for _, m := range metrics {
		if !slices.Contains(skip, m) && math.Abs(got[m]-want[m]) > tol {
			t.Errorf("%s: %s = %.5f, README %.4f (tolerance %g)", what, m, got[m], want[m], tol)
		}
	}
}

// TestLuceneRunFigures evaluates the reference Lucene runs (kept at depth 100).
//
// The README's figures keep the runs' rank order on tied scores (Lucene's order: internal
// document number); trec_eval, and Evaluate, break ties by doc id descending instead. In rank
// order every figure but MAP is reproduced to the 4 decimals printed, on every split. MAP was
// measured at depth 1000, so at depth 100 it falls short. In trec_eval order the test splits
// still agree to 4 decimals; the "all" splits move by up to 0.0014 (tied scores around
// rank 10 of some CISI queries).
func TestLuceneRunFigures(t *testing.T) {
	for _, a := range luceneAnchors {
		what := a.coll + " " + a.split
		run, err := eval.ReadTREC(filepath.Join("testdata", "lucene-bm25-english-"+a.coll+".run"))
		if err != nil {
			t.Fatal(err)
		}
		qrels := readQrels(t, filepath.Join("..", "datasets", a.coll, "qrels", a.split+".tsv"))
		ranked, err := eval.Evaluate(inRankOrder(run), qrels, metrics)
		if err != nil {
			t.Fatal(err)
		}
		check(t, what+" (rank order)", ranked, a.want, 0.5e-4, "MAP")
		if ranked["MAP"] > a.want["MAP"]+0.5e-4 {
			t.Errorf("%s: depth-100 MAP %.5f above the depth-1000 figure %.4f", what, ranked["MAP"], a.want["MAP"])
		}
		trec, err := eval.Evaluate(run, qrels, metrics)
		if err != nil {
			t.Fatal(err)
		}
		if a.split == "test" {
			check(t, what+" (trec_eval order)", trec, a.want, 0.5e-4, "MAP")
		} else {
			check(t, what+" (trec_eval order)", trec, a.want, 0.0015, "MAP")
		}
	}
}

// TestBM25ReproducesLucene is the acceptance check of package index's BM25: with Lucene's
// defaults it must score every (query, passage) pair of the reference runs exactly as Lucene
// 4.10 did (float32 equality), and reach the README's figures at depth 1000: nDCG@10 within
// 0.02 in trec_eval order (the criterion), every figure to 4 decimals in Lucene's
// order.
func TestBM25ReproducesLucene(t *testing.T) {
	var rows []eval.Row
	for _, coll := range []string{"cranfield", "cisi"} {
		c := readCollection(t, filepath.Join("..", "datasets", coll))
		x := index.NewBM25(c.ids, c.texts, index.DefaultBM25Params())
		run := eval.Run{}
		for q, text := range c.queries {
			run[q] = x.Search(text, 1000)
		}

		lucene, err := eval.ReadTREC(filepath.Join("testdata", "lucene-bm25-english-"+coll+".run"))
		if err != nil {
			t.Fatal(err)
		}
		pairs, mismatched, overlap, top := 0, 0, 0, 0
		for q, lh := range lucene {
			mine := map[string]float64{}
			for _, h := range run[q] {
				mine[h.DocID] = h.Score
			}
			for _, h := range lh {
				pairs++
				if s, ok := mine[h.DocID]; !ok || float32(s) != float32(h.Score) {
					mismatched++
					if mismatched <= 5 {
						t.Errorf("%s query %s doc %s: BM25 %v (found %v), Lucene %v", coll, q, h.DocID, s, ok, h.Score)
					}
				}
			}
			overlap += topOverlap(run[q], lh, 10)
			top += min(10, len(lh))
		}
		if mismatched > 0 {
			t.Errorf("%s: %d of %d Lucene (query, passage) scores not reproduced", coll, mismatched, pairs)
		}
		if overlap != top {
			t.Errorf("%s: top-10 overlap with Lucene %d of %d", coll, overlap, top)
		}
		t.Logf("%s: %d Lucene scores reproduced bit for bit, top-10 overlap %d/%d", coll, pairs-mismatched, overlap, top)

		for _, a := range luceneAnchors {
			if a.coll != coll {
				continue
			}
			what := a.coll + " " + a.split
			qrels := readQrels(t, filepath.Join("..", "datasets", a.coll, "qrels", a.split+".tsv"))
			got, err := eval.Evaluate(run, qrels, metrics)
			if err != nil {
				t.Fatal(err)
			}
			if d := got["nDCG@10"] - a.want["nDCG@10"]; math.Abs(d) > 0.02 {
				t.Errorf("%s: nDCG@10 %.4f, Lucene %.4f: more than 0.02 apart", what, got["nDCG@10"], a.want["nDCG@10"])
			}
			check(t, what+" (trec_eval order)", got, a.want, 0.0015)
			inLucene, err := eval.Evaluate(inLuceneOrder(run, c.ids), qrels, metrics)
			if err != nil {
				t.Fatal(err)
			}
			check(t, what+" (Lucene order)", inLucene, a.want, 0.5e-4)
			rows = append(rows,
				eval.Row{System: "index.BM25 " + what, Scores: got},
				eval.Row{System: "index.BM25 " + what + ", Lucene tie order", Scores: inLucene},
				eval.Row{System: "Lucene 4.10 " + what + " (README)", Scores: a.want})
		}
	}
	t.Log("depth 1000, trec_eval tie order unless stated\n" + eval.FormatTable(metrics, rows))
}

// topOverlap counts the documents two lists share in their first n, extending each list's
// cut past n while its scores tie with its n-th score.
func topOverlap(a, b []index.Hit, n int) int {
	set := map[string]bool{}
	for _, h := range withTies(a, n) {
		set[h.DocID] = true
	}
	shared := 0
	for _, h := range withTies(b, n) {
		if set[h.DocID] {
			shared++
		}
	}
	return min(shared, n, len(a), len(b))
}

func withTies(hits []index.Hit, n int) []index.Hit {
	if len(hits) <= n {
		return hits
	}
	end := n
	for end < len(hits) && float32(hits[end].Score) == float32(hits[n-1].Score) {
		end++
	}
	return hits[:end]
}
