package gradcache

import (
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// copyChunk moves a chunk's rows into the side's tensor and back, zeroing the positions past
// the chunk's length, for pooled [rows, H] and token [rows, L, D] vectors; firstDiffRow finds the
// first row that differs within the chunk's positions only.
func TestCopyChunk(t *testing.T) {
	// Token vectors: side [3, 3, 2], chunk [2, 2, 2] at row 1.
	side := tensor.New(tensor.WithShape(3, 3, 2), tensor.WithBacking(slices.Repeat([]float32{9}, 18)))
	chunk := tensor.New(tensor.WithShape(2, 2, 2), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6, 7, 8}))
	copyChunk(chunk, side, 1, true)
	want := []float32{9, 9, 9, 9, 9, 9, 1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 0, 0}
	if got := side.Data().([]float32); !slices.Equal(got, want) {
		t.Fatalf("into the side: %v, want %v", got, want)
	}
	back := tensor.New(tensor.WithShape(2, 2, 2), tensor.Of(tensor.Float32))
	copyChunk(back, side, 1, false)
	if !slices.Equal(back.Data().([]float32), chunk.Data().([]float32)) {
		t.Fatalf("back into the chunk: %v, want %v", back.Data(), chunk.Data())
	}
	if r := firstDiffRow(chunk, side, 1); r != -1 {
		t.Fatalf("firstDiffRow of a copied chunk = %d, want -1", r)
	}
	side.Data().([]float32)[12+3] = 4.5 // row 2, position 1: the chunk's row 1
	if r := firstDiffRow(chunk, side, 1); r != 1 {
		t.Fatalf("firstDiffRow = %d, want 1", r)
	}
	side.Data().([]float32)[12+5] = 1 // row 2, position 2: past the chunk's length, not compared
	side.Data().([]float32)[12+3] = 8
	if r := firstDiffRow(chunk, side, 1); r != -1 {
		t.Fatalf("firstDiffRow with a difference past the chunk's length = %d, want -1", r)
	}

	// Pooled vectors: side [4, 2], chunk [2, 2] at row 2.
	pooled := tensor.New(tensor.WithShape(4, 2), tensor.WithBacking([]float64{1, 1, 1, 1, 1, 1, 1, 1}))
	pc := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{3, 4, 5, 6}))
	copyChunk(pc, pooled, 2, true)
	if got, want := pooled.Data().([]float64), []float64{1, 1, 1, 1, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("pooled into the side: %v, want %v", got, want)
	}
	if r := firstDiffRow(pc, pooled, 1); r != 0 {
		t.Fatalf("firstDiffRow against rows 1..2 = %d, want 0", r)
	}
}
