package index

import (
	"fmt"
	"slices"
)

// RRF fuses runs (query id -> ranked hits) by Reciprocal Rank Fusion (Cormack, Clarke and
// Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual Rank Learning
// Methods", SIGIR 2009):
//
//	score(q, d) = sum over runs r holding d for q of 1 / (k + rank_r(q, d))
//
// where rank_r is d's 1-based position in run r's list for q, as given (lists are expected to
// be sorted best first; their scores are not read). Only the first depth hits of each list
// take part (all of them when depth < 1); a document listed twice in one list counts at its
// first position. The result holds every query of any run, with all fused documents sorted by
// fused score descending, ties by DocID ascending. The paper uses k = 60. It panics when k < 0.
func RRF(k int, depth int, runs ...map[string][]Hit) map[string][]Hit {
	if k < 0 {
		panic(fmt.Sprintf("index: RRF: k = %d must be >= 0", k))
	}
	queries := make(map[string]bool)
	for _, run := range runs {
		for q := range run {
			queries[q] = true
		}
	}
	out := make(map[string][]Hit, len(queries))
	for q := range queries {
		fused := make(map[string]float64)
		var order []string // first-seen order, so the sums below are built deterministically
		for _, run := range runs {
			hits := run[q]
			if depth >= 1 && len(hits) > depth {
				hits = hits[:depth]
			}
			seen := make(map[string]bool, len(hits))
			for i, h := range hits {
				if seen[h.DocID] {
					continue
				}
				seen[h.DocID] = true
				if _, ok := fused[h.DocID]; !ok {
					order = append(order, h.DocID)
				}
				fused[h.DocID] += 1 / float64(k+i+1)
			}
		}
		hits := make([]Hit, 0, len(order))
		for _, d := range order {
			hits = append(hits, Hit{DocID: d, Score: fused[d]})
		}
		SortHits(hits)
		out[q] = slices.Clip(hits)
	}
	return out
}
