package index

import (
	"fmt"
	"math"
)

// CheckRows validates the rows every vector index is built from: ids (one per row, non-empty,
// distinct) and vecs, len(ids) rows of dim float32 values stored row-major, all finite. It
// returns each id's row. Flat, the HNSW of package index/ann and the shard writer of
// index/shard call it and prefix its errors with their own name.
func CheckRows(ids []string, vecs []float32, dim int) (map[string]int, error) {
	if dim < 1 {
		return nil, fmt.Errorf("dim %d must be >= 1", dim)
	}
	if len(vecs) != len(ids)*dim {
		return nil, fmt.Errorf("%d values for %d ids × dim %d (want %d)", len(vecs), len(ids), dim, len(ids)*dim)
	}
	row := make(map[string]int, len(ids))
	for i, id := range ids {
		if id == "" {
			return nil, fmt.Errorf("empty id at row %d", i)
		}
		if j, ok := row[id]; ok {
			return nil, fmt.Errorf("id %q at rows %d and %d", id, j, i)
		}
		row[id] = i
	}
	for i, v := range vecs {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("row %d (id %q) column %d is %v", i/dim, ids[i/dim], i%dim, v)
		}
	}
	return row, nil
}
