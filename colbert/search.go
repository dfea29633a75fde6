package colbert

import (
	"fmt"
	"math"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
)

// blockTokens bounds the passage tokens scored by one GEMM of exact search (a [Lq, block]
// float32 similarity block, 4 MiB for Lq = 32).
const blockTokens = 32768

// MaxSimScore is ColBERT's late-interaction score (Khattab & Zaharia 2020, eq. 3) of query
// tokens q (nq×dim) against passage tokens p (np×dim): sum over q's rows of the largest inner
// product with a row of p (0 for a query token when p has no rows), summed in float64.
func MaxSimScore(q, p []float32, dim int) float64 {
	nq, np := len(q)/dim, len(p)/dim
	var s float64
	for i := range nq {
		if np == 0 {
			continue
		}
		best := float32(math.Inf(-1))
		for j := range np {
			if v := index.DotInOrder(q[i*dim:(i+1)*dim], p[j*dim:(j+1)*dim]); v > best {
				best = v
			}
		}
		s += float64(best)
	}
	return s
}

// Exact ranks passages by exact MaxSim against every passage's token vectors: one GEMM of the
// query's tokens with a block of passage tokens, then each passage's max per query token.
type Exact struct {
	IDs  []string
	Docs *Tokens
}

// NewExact checks that ids and docs agree.
func NewExact(ids []string, docs *Tokens) (*Exact, error) {
	if len(ids) != docs.Len() {
		return nil, fmt.Errorf("colbert: %d passage ids for %d encoded passages", len(ids), docs.Len())
	}
	return &Exact{IDs: ids, Docs: docs}, nil
}

// Scores returns the MaxSim score of the query tokens q (nq×Dim) against every passage.
func (x *Exact) Scores(q []float32) []float64 {
	return scoreRange(q, x.Docs, 0, x.Docs.Len(), nil)
}

// scoreRange scores passages lo..hi-1 (all, or those listed in only when non-nil: then the
// scores are in only's order) against q.
func scoreRange(q []float32, docs *Tokens, lo, hi int, only []int) []float64 {
	d := docs.Dim
	nq := len(q) / d
	var list []int
	if only != nil {
		list = only
	} else {
		list = make([]int, hi-lo)
		for i := range list {
			list[i] = lo + i
		}
	}
	out := make([]float64, len(list))
	sim := make([]float32, nq*blockTokens)
	for start := 0; start < len(list); {
		// the passages start.. whose tokens fit one block (at least one passage)
		end, n := start, 0
		for end < len(list) && (end == start || n+docs.Count(list[end]) <= blockTokens) {
			n += docs.Count(list[end])
			end++
		}
		buf := docTokens(docs, list[start:end], only == nil, n)
		if n > blockTokens {
			sim = make([]float32, nq*n)
		}
		model.Sgemm(false, true, nq, n, d, 1, q, d, buf, d, 0, sim, n)
		col := 0
		for k := start; k < end; k++ {
			c := docs.Count(list[k])
			var s float64
			if c > 0 {
				for i := range nq {
					row := sim[i*n+col : i*n+col+c]
					best := row[0]
					for _, v := range row[1:] {
						if v > best {
							best = v
						}
					}
					s += float64(best)
				}
			}
			out[k] = s
			col += c
		}
		start = end
	}
	return out
}

// docTokens returns the token rows of the passages list, contiguous: a view of docs.Vecs when
// contiguous says they follow each other, else a copy.
func docTokens(docs *Tokens, list []int, contiguous bool, n int) []float32 {
	d := docs.Dim
	if contiguous {
		return docs.Vecs[docs.Offs[list[0]]*d : (docs.Offs[list[0]]+n)*d]
	}
	buf := make([]float32, 0, n*d)
	for _, i := range list {
		buf = append(buf, docs.Rows(i)...)
	}
	return buf
}

// Search returns the k best passages for the query tokens q, best first (ties by corpus order).
func (x *Exact) Search(q []float32, k int) []index.Hit {
	return topHits(x.IDs, x.Scores(q), nil, k)
}

// topHits returns the k best of scores (of passages idx[i], or i when idx is nil), best first,
// ties broken as index.TopK breaks them.
func topHits(ids []string, scores []float64, idx []int, k int) []index.Hit {
	tk := index.NewTopK(k)
	for i, s := range scores {
		j := i
		if idx != nil {
			j = idx[i]
		}
		tk.Offer(index.Hit{DocID: ids[j], Score: s})
	}
	return tk.Hits()
}
