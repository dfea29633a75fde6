// Package crossenc scores (query, passage) pairs with a cross-encoder for inference: pairs sorted
// by length, padded to length buckets, each bucket split between parallel graphs. The reranker
// kind evaluates with it and the retriever's distillation scores its teacher's pairs with it. It
// does not train (experiment/reranker does).
package crossenc

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// workers is the number of inference graphs scoring pairs in parallel.
const workers = 2

// Batch is the most pairs per inference graph run.
const Batch = 50

// batchTokens caps the pair tokens (padding included) of one inference graph run: a run of B
// pairs padded to Lb tokens holds B = min(Batch, batchTokens / Lb) pairs, so that a long
// bucket's graph (its activations grow with B·Lb, its attention scores with B·Lb²) stays near
// the size of Batch pairs of 96 tokens (the Cranfield recipe's L, where B = Batch).
const batchTokens = Batch * 96

// bucket is the granularity of the padded lengths: a batch of pairs is padded to its
// longest pair rounded up to a multiple of bucket tokens (at most L).
const bucket = 32

// BucketLen is the padded length of a pair of n tokens: n rounded up to a multiple of
// bucket, at most L.
func BucketLen(n, L int) int {
	return min(L, max(1, (n+bucket-1)/bucket)*bucket)
}

// Score scores n pairs encoded to L tokens each (enc, row-major, as EncodePairBatch lays
// them out) with m and returns their scores in enc's order, with a progress bar. The pairs are
// sorted by length (their mask's count) and grouped by BucketLen, and each group runs through
// graphs built for its padded length, so a short pair costs its own length rather than L; the
// scores equal those of graphs padded to L within float32 rounding (the padding is masked;
// TestScorePairsBucketsMatchFixedPadding). The groups run one after another, shortest first,
// each split between workers graphs built for it and closed after it.
func Score(m *model.CrossEncoder, enc tokenize.Batch, n, L int, progress io.Writer, desc string) ([]float32, error) {
	bar := progressbar.NewOptions(n, progressbar.OptionSetWriter(progress), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(24), progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(progress) }))
	order := make([]int, n)
	length := make([]int, n)
	for i := range order {
		order[i] = i
		for _, v := range enc.Mask[i*L : (i+1)*L] {
			if v != 0 {
				length[i]++
			}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return length[a] - length[b] })
	scores := make([]float32, n)
	for lo := 0; lo < n; {
		lb := BucketLen(length[order[lo]], L)
		hi := lo
		for hi < n && BucketLen(length[order[hi]], L) == lb {
			hi++
		}
		if err := bucketPairs(m, enc, order[lo:hi], L, lb, scores, bar); err != nil {
			return nil, err
		}
		// The bucket's graphs are closed: collect them before the next bucket's are built, so
		// that the process holds one bucket's graphs, not the sum over buckets (a MiniLM graph
		// of 25 x 192 tokens holds about 1 GB of activations).
		debug.FreeOSMemory()
		lo = hi
	}
	_ = bar.Finish()
	return scores, nil
}

// Pairs scores the pairs (queries[i], passages[i]) with the cross-encoder m, each encoded
// by tok as [CLS] query [SEP] passage [SEP] cut to L tokens, as evaluation scores them (length
// buckets, workers graphs), with a progress bar described by desc on progress. It returns
// the scores in the pairs' order and what truncation cut. The retriever's distillation (loss.teacher)
// scores its training pairs with it.
func Pairs(m *model.CrossEncoder, tok *tokenize.Tokenizer, queries, passages []string, L int, progress io.Writer, desc string) ([]float32, tokenize.TruncCount, error) {
	var cut tokenize.TruncCount
	if len(queries) == 0 {
		return nil, cut, nil
	}
	enc := cut.Add(tok.EncodePairBatch(queries, passages, L))
	scores, err := Score(m, enc, len(queries), L, progress, desc)
	return scores, cut, err
}

// bucketPairs scores the pairs idx (rows of enc, L tokens each, every one at most lb tokens
// long) cut to their first lb tokens, writing scores[i] for each i of idx: the pairs are split
// in contiguous chunks between up to workers graphs of B x lb.
func bucketPairs(m *model.CrossEncoder, enc tokenize.Batch, idx []int, L, lb int, scores []float32, bar *progressbar.ProgressBar) error {
	B := max(1, min(Batch, batchTokens/lb))
	batches := (len(idx) + B - 1) / B
	workers := min(workers, batches)
	per := (batches + workers - 1) / workers * B // pairs per worker, whole batches
	// The runners are built before any runs: building a graph's tape machine sets the engine
	// of the parameter tensors every runner shares, a write that must not overlap a run.
	runners := make([]*model.ScoreRunner, workers)
	defer func() {
		for _, r := range runners {
			if r != nil {
				r.Close()
			}
		}
	}()
	for w := range runners {
		r, err := model.NewScoreRunner(m, B, lb)
		if err != nil {
			return err
		}
		runners[w] = r
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		lo, hi := w*per, min(len(idx), (w+1)*per)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids, types := make([]int, B*lb), make([]int, B*lb)
			mask := make([]float32, B*lb)
			for s := lo; s < hi; s += B {
				e := min(hi, s+B)
				for k, i := range idx[s:e] {
					copy(ids[k*lb:(k+1)*lb], enc.IDs[i*L:i*L+lb])
					copy(mask[k*lb:(k+1)*lb], enc.Mask[i*L:i*L+lb])
					copy(types[k*lb:(k+1)*lb], enc.Types[i*L:i*L+lb])
				}
				k := e - s
				out, err := runners[w].Score(ids[:k*lb], mask[:k*lb], types[:k*lb], k)
				if err != nil {
					errs[w] = err
					return
				}
				for j, i := range idx[s:e] {
					scores[i] = out[j]
				}
				_ = bar.Add(k)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
