package main

import (
	"testing"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
)

// TestLinear: the fusion keeps a's candidates, adds w times b's score (0 where b lacks the
// candidate) and sorts by the fused score, ties by document id.
func TestLinear(t *testing.T) {
	a := eval.Run{"q1": {{DocID: "d1", Score: 3}, {DocID: "d2", Score: 2}, {DocID: "d3", Score: 1}}}
	b := eval.Run{"q1": {{DocID: "d3", Score: 10}, {DocID: "d2", Score: 5}, {DocID: "d9", Score: 99}}}
	for _, tc := range []struct {
		w    float64
		want []index.Hit
	}{
		{0, []index.Hit{{DocID: "d1", Score: 3}, {DocID: "d2", Score: 2}, {DocID: "d3", Score: 1}}},
		{0.2, []index.Hit{{DocID: "d1", Score: 3}, {DocID: "d2", Score: 3}, {DocID: "d3", Score: 3}}}, // a tie: by id
		{0.3, []index.Hit{{DocID: "d3", Score: 4}, {DocID: "d2", Score: 3.5}, {DocID: "d1", Score: 3}}},
		{1, []index.Hit{{DocID: "d3", Score: 11}, {DocID: "d2", Score: 7}, {DocID: "d1", Score: 3}}},
	} {
		got := linear(a, b, tc.w)["q1"]
		if len(got) != len(tc.want) {
			t.Fatalf("w %v: %d hits, want %d (a's candidates only)", tc.w, len(got), len(tc.want))
		}
		for i := range got {
			// 0.3 * 5 rounds: scores to 1e-12
			if got[i].DocID != tc.want[i].DocID || got[i].Score-tc.want[i].Score > 1e-12 || tc.want[i].Score-got[i].Score > 1e-12 {
				t.Fatalf("w %v: hits %v, want %v", tc.w, got, tc.want)
			}
		}
	}
}
