package splade

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
)

// SelectFile is the dev grid of the passages' pruning, under runs/ (dev split name first): one
// line per splade.select_top_k_passage value with its dev nDCG@10, terms per passage, postings
// and search milliseconds per query.
const SelectFile = "splade.select.tsv"

// choosePruning chooses the passages' pruning on the dev split (splade.select_top_k_passage):
// docs are the trained encoder's passage vectors kept to the largest value's weights; for each
// value, smallest first, the vectors are pruned to it (index.PruneTerms: the same as pruning
// the full vectors), indexed and the dev queries searched. It writes
// runs/<dev>.splade.select.tsv and returns the smallest value whose dev nDCG@10 is at least the
// largest value's minus splade.select_tolerance (the largest always is). The choice depends on
// the rankings alone, not on the timings.
func (r *spladeRun) choosePruning(ids []string, docs [][]index.Term, qr *model.SpladeRunner) (int, error) {
	c, split, depth := r.c, r.rec.Data.DevSplit, r.rec.Eval.Depth
	qrels, ok := r.ds.Qrels[split]
	if !ok || len(qrels) == 0 {
		return 0, fmt.Errorf("splade.select_top_k_passage: data.dev_split %q has no judged queries", split)
	}
	qids := qrels.QueryIDs()
	queries := make([][]index.Term, len(qids))
	for i, q := range qids {
		text, _ := r.ds.Queries.Text(q)
		var err error
		if queries[i], err = r.queryTerms(qr, text); err != nil {
			return 0, err
		}
	}
	ks := slices.Clone(c.SelectTopKPassage)
	slices.Sort(ks)
	ks = slices.Compact(ks)
	var tsv bytes.Buffer
	fmt.Fprintf(&tsv, "top_k_passage\tnDCG@10\tpassage_terms\tpostings\tquery_search_milliseconds\n")
	scores := make([]float64, len(ks))
	for i, k := range ks {
		x, err := index.NewSparse(ids, pruneAll(docs, k), r.s.Dim())
		if err != nil {
			return 0, err
		}
		run := eval.Run{}
		start := time.Now()
		for j, q := range qids {
			run[q], _ = x.Search(queries[j], depth)
		}
		ms := 1000 * time.Since(start).Seconds() / float64(len(qids))
		m, err := eval.Evaluate(run, qrels, []string{"nDCG@10"})
		if err != nil {
			return 0, err
		}
		scores[i] = m["nDCG@10"]
		fmt.Fprintf(&tsv, "%d\t%.6f\t%.1f\t%d\t%.3f\n", k, scores[i], float64(x.Postings())/float64(max(1, x.Len())), x.Postings(), ms)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, experiment.RunsDir), 0o755); err != nil { // a resumed run's runs/ may be gone
		return 0, err
	}
	if err := atomicfile.WriteFile(filepath.Join(r.dir, experiment.RunsDir, split+"."+SelectFile), tsv.Bytes()); err != nil {
		return 0, err
	}
	chosen := pickPruning(scores, c.SelectTolerance)
	fmt.Fprintf(r.o.Out, "splade: pruning chosen on %d %s queries from %v: top_k_passage %d, nDCG@10 %.4f (the largest, %d: %.4f; tolerance %g; runs/%s.%s)\n",
		len(qids), split, ks, ks[chosen], scores[chosen], ks[len(ks)-1], scores[len(ks)-1], c.SelectTolerance, split, SelectFile)
	return ks[chosen], nil
}

// pickPruning returns the first index (values ascending) whose score is at least the last's
// (the largest value's) minus tolerance.
func pickPruning(scores []float64, tolerance float64) int {
	ref := scores[len(scores)-1]
	for i, s := range scores {
		if s >= ref-tolerance {
			return i
		}
	}
	return len(scores) - 1
}
