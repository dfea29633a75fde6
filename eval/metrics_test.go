package eval

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/index"
)

// ranked returns hits d1..dn with strictly decreasing scores.
func ranked(n int) []index.Hit {
	hits := make([]index.Hit, n)
	for i := range hits {
		hits[i] = index.Hit{DocID: fmt.Sprintf("d%d", i+1), Score: float64(n - i)}
	}
	return hits
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestWorkedValues(t *testing.T) {
	// Two relevant passages (gain 1) retrieved at ranks 2 and 5.
	run := Run{"q": ranked(10)}
	qrels := map[string]map[string]int{"q": {"d2": 1, "d5": 1, "d1": 0}}
	got, err := Evaluate(run, qrels, []string{"nDCG@10", "MRR@10", "Recall@10", "P@10", "MAP"})
	if err != nil {
		t.Fatal(err)
	}
	wantNDCG := (1/math.Log2(3) + 1/math.Log2(6)) / (1 + 1/math.Log2(3))
	if !near(got["nDCG@10"], 0.624, 5e-4) || !near(got["nDCG@10"], wantNDCG, 1e-12) {
		t.Errorf("nDCG@10 = %.6f, want 0.624 (%.6f)", got["nDCG@10"], wantNDCG)
	}
	for name, want := range map[string]float64{"MRR@10": 0.5, "Recall@10": 1, "P@10": 0.2, "MAP": (1.0/2 + 2.0/5) / 2} {
		if !near(got[name], want, 1e-12) {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}

	// Three relevant passages; the top five are judged [0, 1, 0, 1, 0].
	run = Run{"q": ranked(5)}
	qrels = map[string]map[string]int{"q": {"d1": 0, "d2": 1, "d3": 0, "d4": 1, "d5": 0, "elsewhere": 1}}
	got, err = Evaluate(run, qrels, []string{"Recall@5", "nDCG@5", "P@5", "MAP", "MRR@1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"Recall@5": 2.0 / 3, "P@5": 0.4, "MAP": (1.0/2 + 2.0/4) / 3, "MRR@1": 0} {
		if !near(got[name], want, 1e-12) {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if !near(got["nDCG@5"], 0.4982, 1e-4) {
		t.Errorf("nDCG@5 = %.6f, want 0.4982", got["nDCG@5"])
	}
}

func TestGradedGains(t *testing.T) {
	// Gains 1 at rank 1 and 3 at rank 2; the ideal list puts 3 first, then 2 (not retrieved).
	run := Run{"q": ranked(3)}
	qrels := map[string]map[string]int{"q": {"d1": 1, "d2": 3, "x": 2}}
	got, err := Evaluate(run, qrels, []string{"nDCG@2", "nDCG@3"})
	if err != nil {
		t.Fatal(err)
	}
	want2 := (1 + 3/math.Log2(3)) / (3 + 2/math.Log2(3))
	want3 := (1 + 3/math.Log2(3)) / (3 + 2/math.Log2(3) + 1.0/2)
	if !near(got["nDCG@2"], want2, 1e-12) || !near(got["nDCG@3"], want3, 1e-12) {
		t.Errorf("nDCG@2 %v nDCG@3 %v, want %v %v", got["nDCG@2"], got["nDCG@3"], want2, want3)
	}
}

// TestTrecEvalTieOrder: trec_eval sorts by score, ties by doc id descending, ignoring the
// order given.
func TestTrecEvalTieOrder(t *testing.T) {
	run := Run{"q": {{DocID: "a", Score: 1}, {DocID: "b", Score: 1}, {DocID: "c", Score: 2}}}
	qrels := map[string]map[string]int{"q": {"a": 1}}
	got, err := Evaluate(run, qrels, []string{"MRR@10"})
	if err != nil {
		t.Fatal(err)
	}
	if got["MRR@10"] != 1.0/3 { // order c, b, a
		t.Errorf("MRR@10 = %v, want 1/3 (c, then b before a on the tie)", got["MRR@10"])
	}
}

func TestQuerySelection(t *testing.T) {
	run := Run{
		"1":     ranked(3),                 // d1 relevant: perfect
		"extra": ranked(3),                 // not in qrels: ignored
		"3":     {{DocID: "d1", Score: 1}}, // no relevant document: skipped
	}
	qrels := map[string]map[string]int{
		"1": {"d1": 2},
		"2": {"d9": 1}, // relevant but absent from the run: counts 0
		"3": {"d1": 0},
	}
	per, err := PerQuery(run, qrels, []string{"nDCG@10", "Recall@100"})
	if err != nil {
		t.Fatal(err)
	}
	if len(per) != 2 || per["1"]["nDCG@10"] != 1 || per["2"]["nDCG@10"] != 0 || per["2"]["Recall@100"] != 0 {
		t.Errorf("PerQuery = %v, want 1 -> 1, 2 -> 0 and nothing else", per)
	}
	mean, err := Evaluate(run, qrels, []string{"nDCG@10"})
	if err != nil || mean["nDCG@10"] != 0.5 {
		t.Errorf("Evaluate = %v, %v; want nDCG@10 0.5 over queries 1 and 2", mean, err)
	}
}

func TestCutOffs(t *testing.T) {
	run := Run{"q": ranked(2)}
	qrels := map[string]map[string]int{"q": {"d2": 1, "d7": 1}}
	got, err := Evaluate(run, qrels, []string{"P@10", "p@1", "MAP@1", "map@2", "Recall@1"})
	if err != nil {
		t.Fatal(err)
	}
	// P@k divides by k even when fewer are retrieved; MAP@k only counts ranks up to k.
	for name, want := range map[string]float64{"P@10": 0.1, "p@1": 0, "MAP@1": 0, "map@2": 0.25, "Recall@1": 0} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	qrels := map[string]map[string]int{"q": {"d1": 1}}
	tests := []struct {
		name    string
		run     Run
		qrels   map[string]map[string]int
		metrics []string
		want    string
	}{
		{"unknown", Run{}, qrels, []string{"bpref"}, "unknown metric"},
		{"no cut", Run{}, qrels, []string{"nDCG"}, "needs a cut-off"},
		{"bad cut", Run{}, qrels, []string{"P@0"}, "not a positive integer"},
		{"bad cut text", Run{}, qrels, []string{"Recall@ten"}, "not a positive integer"},
		{"none", Run{}, qrels, nil, "no metric"},
		{"duplicate", Run{"q": {{DocID: "d1", Score: 2}, {DocID: "d1", Score: 1}}}, qrels, []string{"MAP"}, "retrieved twice"},
		{"nan", Run{"q": {{DocID: "d1", Score: math.NaN()}}}, qrels, []string{"MAP"}, "NaN"},
		{"no relevant", Run{}, map[string]map[string]int{"q": {"d1": 0}}, []string{"MAP"}, "no query"},
	}
	for _, tt := range tests {
		_, err := Evaluate(tt.run, tt.qrels, tt.metrics)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}
