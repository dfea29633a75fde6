package hybrid

import (
	"context"
	"fmt"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
)

// RRF fuses runs by Reciprocal Rank Fusion (index.RRF: score = sum over runs of 1 / (k + rank),
// the first depth hits of each list by rank; Cormack, Clarke and Büttcher, SIGIR 2009), each
// query's fused list cut to its first depth hits. Ties: index.SortHits (score descending, then
// doc id ascending).
func RRF(k, depth int, runs ...eval.Run) eval.Run {
	lists := make([]map[string][]index.Hit, len(runs))
	for i, r := range runs {
		lists[i] = r
	}
	out := eval.Run(index.RRF(k, depth, lists...))
	for q, hits := range out {
		out[q] = hits[:min(len(hits), depth)]
	}
	return out
}

// normalized is one query's candidates under convex fusion: the union of the systems' first
// depth hits, doc ids in first-seen order (system by system, rank by rank), and for each the
// min-max normalised score in each system (0 where the system did not retrieve it).
type normalized struct {
	docs   []string
	scores [][]float64 // [doc][system]
}

// normalize min-max normalises each system's first depth hits of every query (Bruch, Gai and
// Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023, eq. 2):
//
//	phi(s) = (s - min_q) / (max_q - min_q)
//
// with min_q and max_q the lowest and highest score among that system's hits for query q; a
// list whose hits all score the same (a single hit included) gives each of them 1, and a
// document a system did not retrieve for q has phi = 0, the score of that system's last hit.
// The queries are those of runs[0] (the caller checks that every run holds the same ones).
func normalize(depth int, runs []eval.Run) map[string]*normalized {
	out := make(map[string]*normalized, len(runs[0]))
	for q := range runs[0] {
		n := &normalized{}
		at := map[string]int{}
		for si, r := range runs {
			hits := r[q][:min(len(r[q]), depth)]
			if len(hits) == 0 {
				continue
			}
			lo, hi := hits[0].Score, hits[0].Score
			for _, h := range hits {
				lo, hi = min(lo, h.Score), max(hi, h.Score)
			}
			for _, h := range hits {
				i, ok := at[h.DocID]
				if !ok {
					i = len(n.docs)
					at[h.DocID] = i
					n.docs = append(n.docs, h.DocID)
					n.scores = append(n.scores, make([]float64, len(runs)))
				}
				phi := 1.0
				if hi > lo {
					phi = (h.Score - lo) / (hi - lo)
				}
				n.scores[i][si] = phi
			}
		}
		out[q] = n
	}
	return out
}

// combine returns the convex combination sum_i w_i phi_i(d) over each query's candidates,
// sorted (index.SortHits: score descending, then doc id ascending) and cut to depth.
func combine(norm map[string]*normalized, w []float64, depth int) eval.Run {
	out := make(eval.Run, len(norm))
	for q, n := range norm {
		hits := make([]index.Hit, len(n.docs))
		for i, d := range n.docs {
			s := 0.0
			for j, wj := range w {
				s += wj * n.scores[i][j]
			}
			hits[i] = index.Hit{DocID: d, Score: s}
		}
		index.SortHits(hits)
		out[q] = hits[:min(len(hits), depth)]
	}
	return out
}

// Convex fuses runs by the convex combination of their per-query min-max normalised scores
// (Bruch et al. 2023, eq. 2 and section 4: convex combination, "TM2C2" with the empirical
// minimum and maximum of each list):
//
//	score(q, d) = sum_i w_i phi_i(q, d),  w_i >= 0, sum_i w_i = 1
//
// over the union of the runs' first depth hits of each query, phi as normalize says. Each
// query's list is sorted by index.SortHits (score descending, ties by doc id ascending) and cut
// to its first depth hits. It panics unless len(w) == len(runs) >= 1.
func Convex(w []float64, depth int, runs ...eval.Run) eval.Run {
	if len(w) != len(runs) || len(runs) == 0 {
		panic(fmt.Sprintf("hybrid: Convex: %d weights for %d runs", len(w), len(runs)))
	}
	return combine(normalize(depth, runs), w, depth)
}

// Trial is one weight vector tried on dev and its score.
type Trial struct {
	Weights []float64 `json:"weights"`
	Score   float64   `json:"score"`
}

// ChooseWeights scores every weight vector of WeightVectors(grid, len(runs)) by the convex
// fusion of the dev runs (Convex) on metric against qrels, and returns the best (the first in
// WeightVectors' order among equal scores) with every trial in that order. It stops with
// ctx's error when ctx is done.
func ChooseWeights(ctx context.Context, grid []float64, depth int, metric string, qrels map[string]map[string]int, runs ...eval.Run) (best Trial, trials []Trial, err error) {
	vecs := WeightVectors(grid, len(runs))
	if len(vecs) == 0 {
		return Trial{}, nil, fmt.Errorf("hybrid: no %d values of the grid %v sum to 1", len(runs), grid)
	}
	norm := normalize(depth, runs)
	for i, w := range vecs {
		if err := ctx.Err(); err != nil {
			return Trial{}, nil, err
		}
		m, err := eval.Evaluate(combine(norm, w, depth), qrels, []string{metric})
		if err != nil {
			return Trial{}, nil, err
		}
		t := Trial{Weights: w, Score: m[metric]}
		trials = append(trials, t)
		if i == 0 || t.Score > best.Score {
			best = t
		}
	}
	return best, trials, nil
}
