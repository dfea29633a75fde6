package hybrid

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
)

// run builds a one-query-per-key run from "doc score" pairs in rank order.
func run(lists map[string][]index.Hit) eval.Run { return eval.Run(lists) }

func hits(pairs ...any) []index.Hit {
	var out []index.Hit
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, index.Hit{DocID: pairs[i].(string), Score: pairs[i+1].(float64)})
	}
	return out
}

func assertHits(t *testing.T, what string, got, want []index.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range want {
		if got[i].DocID != want[i].DocID || math.Abs(got[i].Score-want[i].Score) > 1e-12 {
			t.Fatalf("%s: rank %d is %v, want %v (all: %v)", what, i+1, got[i], want[i], got)
		}
	}
}

// TestRRFByHand: k = 60 over two lists, by hand: a 1/61 + 1/62, c 1/63 + 1/61, b 1/62, d 1/63;
// x and y score exactly the same (1/61 + 1/62) and go by doc id ascending; depth cuts the
// inputs and the output.
func TestRRFByHand(t *testing.T) {
	a := run(map[string][]index.Hit{"q": hits("a", 9.0, "b", 8.0, "c", 7.0), "t": hits("y", 2.0, "x", 1.0)})
	b := run(map[string][]index.Hit{"q": hits("c", 0.9, "a", 0.8, "d", 0.7), "t": hits("x", 2.0, "y", 1.0)})
	got := RRF(60, 1000, a, b)
	assertHits(t, "q", got["q"], hits("a", 1.0/61+1.0/62, "c", 1.0/63+1.0/61, "b", 1.0/62, "d", 1.0/63))
	assertHits(t, "tie", got["t"], hits("x", 1.0/61+1.0/62, "y", 1.0/61+1.0/62))
	// depth 2: only a, b of the first list and c, a of the second; two fused hits kept
	got = RRF(60, 2, a, b)
	assertHits(t, "q depth 2", got["q"], hits("a", 1.0/61+1.0/62, "c", 1.0/61))
}

// TestConvexByHand: min-max per query and system, by hand. First list a 10, b 6, c 2 -> 1, 0.5,
// 0; second c 0.9, a 0.5, d 0.1 -> 1, 0.5, 0; w = (0.3, 0.7): a 0.3 + 0.35 = 0.65, b 0.15,
// c 0.7, d 0 (and 0 for the second list's missing b, the first's missing d).
func TestConvexByHand(t *testing.T) {
	a := run(map[string][]index.Hit{"q": hits("a", 10.0, "b", 6.0, "c", 2.0), "one": hits("z", 5.0)})
	b := run(map[string][]index.Hit{"q": hits("c", 0.9, "a", 0.5, "d", 0.1), "one": hits("y", 3.0, "z", -1.0)})
	got := Convex([]float64{0.3, 0.7}, 1000, a, b)
	assertHits(t, "q", got["q"], hits("c", 0.7, "a", 0.65, "b", 0.15, "d", 0.0))
	// a single hit (max = min) normalises to 1: z 0.3 * 1 + 0.7 * 0, y 0.7 * 1.
	assertHits(t, "one hit", got["one"], hits("y", 0.7, "z", 0.3))
	// weights (0.5, 0.5): a 0.75, c 0.5, b 0.25, d 0; depth 2 reads a 10, b 6 -> 1, 0 and c, a
	// -> 1, 0: a 0.5, c 0.5 (tie: a before c), b 0, output cut to 2.
	assertHits(t, "even", Convex([]float64{0.5, 0.5}, 1000, a, b)["q"], hits("a", 0.75, "c", 0.5, "b", 0.25, "d", 0.0))
	assertHits(t, "depth 2", Convex([]float64{0.5, 0.5}, 2, a, b)["q"], hits("a", 0.5, "c", 0.5))
	// w = (1, 0) keeps the first list's order, its candidates scored by phi; the second list's
	// d scores 0 and sorts by doc id among the zeros (c before d).
	assertHits(t, "w=(1,0)", Convex([]float64{1, 0}, 1000, a, b)["q"], hits("a", 1.0, "b", 0.5, "c", 0.0, "d", 0.0))
}

func TestWeightVectors(t *testing.T) {
	got := WeightVectors([]float64{0, 0.5, 1}, 3)
	want := [][]float64{{0, 0, 1}, {0, 0.5, 0.5}, {0, 1, 0}, {0.5, 0, 0.5}, {0.5, 0.5, 0}, {1, 0, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WeightVectors = %v, want %v", got, want)
	}
	if n := len(WeightVectors(DefaultGrid(), 3)); n != 66 { // C(12, 2) triples of tenths summing to 1
		t.Errorf("%d triples of the default grid, want 66", n)
	}
	if got := WeightVectors([]float64{0.3, 0.6}, 2); got != nil {
		t.Errorf("no pair of 0.3, 0.6 sums to 1, got %v", got)
	}
}

// devRuns are three queries, one relevant doc each, whose nDCG@1 under w = (wA, 1 - wA) is worked
// out by hand: q1 is right for wA in (0.2, 0.8), q2 for wA > 0.375, q3 for wA < 2/3, so on the
// grid 0, 0.25, 0.5, 0.75, 1 only wA = 0.5 gets all three (nDCG@1 = 1); 0.25 and 0.75 two, 0 and
// 1 one.
func devRuns() (eval.Run, eval.Run, map[string]map[string]int) {
	a := run(map[string][]index.Hit{
		"q1": hits("x", 1.0, "r", 0.8, "z", 0.0), // phi x 1, r 0.8, z 0
		"q2": hits("s", 1.0, "v", 0.5, "t", 0.0), // s 1, v 0.5, t 0
		"q3": hits("o", 1.0, "p", 0.5, "m", 0.0), // o 1, p 0.5, m 0
	})
	b := run(map[string][]index.Hit{
		"q1": hits("z", 1.0, "r", 0.8, "x", 0.0), // z 1, r 0.8, x 0: r = 0.8 beats x = wA and z = 1 - wA
		"q2": hits("t", 1.0, "s", 0.4, "v", 0.0), // s = 0.4 + 0.6 wA beats t = 1 - wA iff wA > 0.375
		"q3": hits("p", 1.0, "m", 0.5, "o", 0.0), // p = 1 - 0.5 wA beats o = wA iff wA < 2/3
	})
	qrels := map[string]map[string]int{"q1": {"r": 1}, "q2": {"s": 1}, "q3": {"p": 1}}
	return a, b, qrels
}

func TestChooseWeightsFindsTheKnownWeight(t *testing.T) {
	a, b, qrels := devRuns()
	best, trials, err := ChooseWeights(context.Background(), []float64{0, 0.25, 0.5, 0.75, 1}, 1000, "nDCG@1", qrels, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(best.Weights, []float64{0.5, 0.5}) || best.Score != 1 {
		t.Errorf("best %+v, want weights [0.5 0.5] with nDCG@1 1", best)
	}
	want := []float64{1.0 / 3, 2.0 / 3, 1, 2.0 / 3, 1.0 / 3} // wA = 0, 0.25, 0.5, 0.75, 1
	for i, tr := range trials {
		if math.Abs(tr.Score-want[i]) > 1e-12 || tr.Weights[0] != float64(i)/4 {
			t.Errorf("trial %d: %+v, want wA %v with %v", i, tr, float64(i)/4, want[i])
		}
	}
	// Only q1 judged: wA = 0.25, 0.5 and 0.75 all score 1; the first in grid order wins.
	best, _, err = ChooseWeights(context.Background(), []float64{0, 0.25, 0.5, 0.75, 1}, 1000, "nDCG@1", map[string]map[string]int{"q1": {"r": 1}}, a, b)
	if err != nil || !reflect.DeepEqual(best.Weights, []float64{0.25, 0.75}) {
		t.Errorf("tie: best %+v (%v), want the first of the tied, [0.25 0.75]", best, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := ChooseWeights(ctx, []float64{0, 1}, 1000, "nDCG@1", qrels, a, b); err != context.Canceled {
		t.Errorf("cancelled: err = %v", err)
	}
}
