package ann

import (
	"github.com/ragtrain/ragtrain/index"
)

// Searcher is the inner-product search that index.Flat and HNSW both provide: hits sorted by
// index.Dot score descending, ties by DocID ascending.
type Searcher interface {
	Len() int
	Dim() int
	Search(q []float32, k int) []index.Hit
	SearchBatch(qs []float32, k int) [][]index.Hit
	// Score is the inner product of q with passage id as Search scores it; false when id is
	// not indexed.
	Score(q []float32, id string) (float64, bool)
	// Rows are the indexed ids and N×dim vectors in the order given (read only).
	Rows() ([]string, []float32)
}

var (
	_ Searcher = (*index.Flat)(nil)
	_ Searcher = (*HNSW)(nil)
)

// New indexes the N = len(ids) rows of vecs (N×dim) with exact search (index.Flat) when
// threshold <= 0 or N < threshold, and with an HNSW graph of parameters p otherwise: the rule
// of a recipe's ann_threshold, whose zero value keeps search exact. Errors are those of
// index.NewFlat and NewHNSW.
func New(ids []string, vecs []float32, dim, threshold int, p Params) (Searcher, error) {
	if threshold <= 0 || len(ids) < threshold {
		f, err := index.NewFlat(ids, vecs, dim)
		if err != nil {
			return nil, err // a nil Searcher, not a nil *Flat in one
		}
		return f, nil
	}
	h, err := NewHNSW(ids, vecs, dim, p)
	if err != nil {
		return nil, err
	}
	return h, nil
}
