package colbert

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// SelectFile is the dev grid of the PLAID-style search settings, under runs/ (dev split name
// first): one line per point with its dev nDCG@10, recall of exact MaxSim's top 10 and
// milliseconds per query.
const SelectFile = "colbert_plaid.select.tsv"

// plaidGrid lists the search settings of the dev grid in order of work: fewest ncells first,
// then fewest ndocs, then the highest centroid_score_threshold (a higher threshold prunes more
// passage tokens). An empty select_* list stands for its single value (ncells, ndocs,
// centroid_score_threshold); repeated values count once.
func (c *Config) plaidGrid() []cb.SearchParams {
	ncells := sortedUnique(c.SelectNCells, c.NCells)
	ndocs := sortedUnique(c.SelectNDocs, c.NDocs)
	ths := sortedUnique(c.SelectCentroidScoreThreshold, c.CentroidScoreThreshold)
	slices.Reverse(ths)
	var grid []cb.SearchParams
	for _, nc := range ncells {
		for _, nd := range ndocs {
			for _, th := range ths {
				grid = append(grid, cb.SearchParams{NCells: nc, NDocs: nd, CentroidScoreThreshold: th})
			}
		}
	}
	return grid
}

func sortedUnique[T int | float64](xs []T, single T) []T {
	if len(xs) == 0 {
		return []T{single}
	}
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// choosePlaid searches the dev split's queries with exact MaxSim and with the index at every
// point of the grid (plaidGrid), writes runs/<dev>.colbert_plaid.select.tsv and returns the
// first point, in order of work, whose dev nDCG@10 is at least exact's minus select_tolerance;
// the point of best dev nDCG@10 (the first of a tie) when none is. The choice depends on the
// rankings alone, not on the timings, so a run chooses the same on every machine.
func (r *colbertRun) choosePlaid(enc *cb.Encoder, exact *cb.Exact, plaid *cb.Plaid) (cb.SearchParams, error) {
	c, split, depth := r.c, r.rec.Data.DevSplit, r.rec.Eval.Depth
	qrels, ok := r.ds.Qrels[split]
	if !ok || len(qrels) == 0 {
		return cb.SearchParams{}, fmt.Errorf("colbert.select_*: data.dev_split %q has no judged queries", split)
	}
	qids, qv, err := r.encodeQueries(enc, split)
	if err != nil {
		return cb.SearchParams{}, err
	}
	ndcg := func(run eval.Run) (float64, error) {
		m, err := eval.Evaluate(run, qrels, []string{"nDCG@10"})
		return m["nDCG@10"], err
	}
	exactRun := eval.Run{}
	for i, q := range qids {
		exactRun[q] = exact.Search(qv.Rows(i), depth)
	}
	exactNDCG, err := ndcg(exactRun)
	if err != nil {
		return cb.SearchParams{}, err
	}
	grid := c.plaidGrid()
	var tsv bytes.Buffer
	fmt.Fprintf(&tsv, "ncells\tndocs\tcentroid_score_threshold\tnDCG@10\trecall_of_exact_top10\tquery_milliseconds\n")
	scores := make([]float64, len(grid))
	for gi, p := range grid {
		run, recall := eval.Run{}, 0.0
		start := time.Now()
		for i, q := range qids {
			run[q] = plaid.Search(qv.Rows(i), depth, p)
		}
		ms := 1000 * time.Since(start).Seconds() / float64(len(qids))
		for _, q := range qids {
			recall += topRecall(exactRun[q], run[q], 10)
		}
		if scores[gi], err = ndcg(run); err != nil {
			return cb.SearchParams{}, err
		}
		fmt.Fprintf(&tsv, "%d\t%d\t%g\t%.6f\t%.4f\t%.2f\n", p.NCells, p.NDocs, p.CentroidScoreThreshold, scores[gi], recall/float64(len(qids)), ms)
	}
	chosen, within := pickPlaid(scores, exactNDCG, c.SelectTolerance)
	how := fmt.Sprintf("the cheapest within %g of exact MaxSim's %.4f", c.SelectTolerance, exactNDCG)
	if !within {
		how = fmt.Sprintf("none within %g of exact MaxSim's %.4f: the best", c.SelectTolerance, exactNDCG)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, experiment.RunsDir), 0o755); err != nil { // a resumed run's runs/ may be gone
		return cb.SearchParams{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(r.dir, experiment.RunsDir, split+"."+SelectFile), tsv.Bytes()); err != nil {
		return cb.SearchParams{}, err
	}
	p := grid[chosen]
	fmt.Fprintf(r.o.Out, "colbert_plaid: chosen on %d %s queries from %d settings (%s): ncells %d, ndocs %d, centroid_score_threshold %g, nDCG@10 %.4f (runs/%s.%s)\n",
		len(qids), split, len(grid), how, p.NCells, p.NDocs, p.CentroidScoreThreshold, scores[chosen], split, SelectFile)
	r.metrics[split+"/colbert/nDCG@10"] = exactNDCG
	r.metrics[split+"/colbert_plaid/nDCG@10"] = scores[chosen]
	return p, nil
}

// pickPlaid returns the first grid point (scores in plaidGrid's order of work) whose dev
// nDCG@10 is at least exact - tolerance, and true; when none is, the first of the best, and
// false.
func pickPlaid(scores []float64, exact, tolerance float64) (int, bool) {
	best := 0
	for i, s := range scores {
		if s >= exact-tolerance {
			return i, true
		}
		if s > scores[best] {
			best = i
		}
	}
	return best, false
}
