package sampler

import (
	"fmt"
	"slices"
	"testing"
)

// TestMineFilterDropsByRule: with hand-made scores, the margin rule drops exactly the candidates
// with s_neg > s_pos - margin, the ratio rule (checked second) exactly those left with s_neg >
// relative·s_pos, each count says how many it dropped, and without a filter nothing is dropped.
func TestMineFilterDropsByRule(t *testing.T) {
	qrels := map[string]map[string]int{"q1": {"p1": 1}, "q2": {"p2": 1}}
	ranking := map[string][]string{"q1": {"a", "b", "c", "d", "e", "p1"}, "q2": {"p2", "f", "g", "h"}}
	scores := map[string]float64{
		"q1/p1": 10, "q1/a": 11, "q1/b": 9.6, "q1/c": 9.4, "q1/d": 9.0, "q1/e": 5,
		"q2/p2": 4, "q2/f": 3.9, "q2/g": 3.7, "q2/h": -1,
	}
	score := func(q, d string) (float64, error) {
		s, ok := scores[q+"/"+d]
		if !ok {
			return 0, fmt.Errorf("no score for %s/%s", q, d)
		}
		return s, nil
	}
	for _, c := range []struct {
		name             string
		margin, relative float64
		want             map[string][]string
		margins, ratios  int
	}{
		// q1: s_pos 10; margin 0.5 drops a (11 > 9.5), b (9.6 > 9.5); c (9.4) stays.
		// q2: s_pos 4; margin 0.5 drops f (3.9 > 3.5), g (3.7 > 3.5).
		{"margin", 0.5, 0, map[string][]string{"q1": {"c", "d", "e"}, "q2": {"h"}}, 4, 0},
		// ratio 0.95: q1 drops a, b (> 9.5); q2 drops f (3.9 > 3.8), keeps g (3.7).
		{"relative", 0, 0.95, map[string][]string{"q1": {"c", "d", "e"}, "q2": {"g", "h"}}, 0, 3},
		// both: margin 0.1 drops a (11 > 9.9) and f (3.9 > 3.9 is false: kept by margin); ratio
		// 0.9 then drops b, c (> 9), f (3.9 > 3.6), g (3.7 > 3.6).
		{"both", 0.1, 0.9, map[string][]string{"q1": {"d", "e"}, "q2": {"h"}}, 1, 4},
		{"off", 0, 0, map[string][]string{"q1": {"a", "b", "c", "d", "e"}, "q2": {"f", "g", "h"}}, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := MineOptions{Negatives: 10, Lo: 1, Hi: 6, Strategy: Top}
			if c.margin > 0 || c.relative > 0 {
				o.Filter = &Filter{Margin: c.margin, Relative: c.relative, Score: score}
			}
			exs, st, err := Mine(qrels, ranking, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, ex := range exs {
				if !slices.Equal(ex.NegativeIDs, c.want[ex.QueryID]) {
					t.Errorf("%s: negatives %v, want %v", ex.QueryID, ex.NegativeIDs, c.want[ex.QueryID])
				}
			}
			if st.DroppedMargin != c.margins || st.DroppedRelative != c.ratios {
				t.Errorf("dropped %d by margin and %d by ratio, want %d and %d", st.DroppedMargin, st.DroppedRelative, c.margins, c.ratios)
			}
		})
	}
}
