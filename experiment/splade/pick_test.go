package splade

import "testing"

// TestPickPruning: the smallest value (scores ascending by value) within the tolerance of the
// largest value's score; a smaller index that beats the largest counts; the largest when none.
func TestPickPruning(t *testing.T) {
	for _, c := range []struct {
		scores []float64
		tol    float64
		want   int
	}{
		{[]float64{0.5, 0.597, 0.6}, 0.005, 1},
		{[]float64{0.5, 0.59, 0.6}, 0.005, 2},
		{[]float64{0.61, 0.5, 0.6}, 0, 0},
		{[]float64{0.5, 0.595, 0.6}, 0.005, 1}, // the edge counts
		{[]float64{0.6}, 0.005, 0},
	} {
		if got := pickPruning(c.scores, c.tol); got != c.want {
			t.Errorf("pickPruning(%v, %g) = %d, want %d", c.scores, c.tol, got, c.want)
		}
	}
}
