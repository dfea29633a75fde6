package ragjoint

import (
	"slices"
	"testing"
)

// TestFillDrop: each question keeps its own candidates and every other candidate once; a
// repeat of one of its own or of a column already kept is dropped.
func TestFillDrop(t *testing.T) {
	cands := [][]int{{7, 3}, {7, 9}, {9, 9}}
	drop := make([]float32, 3*6)
	fillDrop(drop, cands, 2)
	want := []float32{
		0, 0, 1, 0, 1, 1, // question 0: 7 (question 1's) repeats its own; 9 kept once
		1, 0, 0, 0, 1, 1, // question 1: 7 (question 0's) and 9 (question 2's) repeat its own
		0, 0, 1, 1, 0, 0, // question 2: 7 and 3 kept; 7 again and 9 (its own) dropped
	}
	if !slices.Equal(drop, want) {
		t.Errorf("drop\n%v\nwant\n%v", drop, want)
	}
}
