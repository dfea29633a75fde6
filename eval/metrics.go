package eval

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/index"
)

// Run maps a query id to its ranked hits.
type Run map[string][]index.Hit

// metric is a parsed metric name such as "nDCG@10".
type metric struct {
	name string // as given by the caller
	kind string // ndcg, mrr, recall, p, map
	k    int    // cut-off; 0 means the whole list (MAP only)
}

// parseMetric reads "nDCG@k", "MRR@k", "Recall@k", "P@k", "MAP" or "MAP@k"; the part before
// '@' is matched without regard to case, k must be a positive integer.
func parseMetric(s string) (metric, error) {
	name, cut, hasCut := strings.Cut(s, "@")
	m := metric{name: s, kind: strings.ToLower(name)}
	switch m.kind {
	case "ndcg", "mrr", "recall", "p", "map":
	default:
		return m, fmt.Errorf("eval: unknown metric %q (want nDCG@k, MRR@k, Recall@k, P@k, MAP or MAP@k)", s)
	}
	if !hasCut {
		if m.kind != "map" {
			return m, fmt.Errorf("eval: metric %q needs a cut-off, as in %s@10", s, name)
		}
		return m, nil
	}
	k, err := strconv.Atoi(cut)
	if err != nil || k < 1 {
		return m, fmt.Errorf("eval: metric %q: cut-off %q is not a positive integer", s, cut)
	}
	m.k = k
	return m, nil
}

func parseMetrics(names []string) ([]metric, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("eval: no metric requested")
	}
	ms := make([]metric, len(names))
	for i, n := range names {
		m, err := parseMetric(n)
		if err != nil {
			return nil, err
		}
		ms[i] = m
	}
	return ms, nil
}

// Evaluate returns, for each metric name, its mean over the evaluated queries (see the
// package doc: queries of qrels with a relevant document; missing from the run counts 0).
// Metric names: "nDCG@k", "MRR@k", "Recall@k", "P@k", "MAP" (whole run), "MAP@k"; the name
// before '@' is case-insensitive. MRR@k is the reciprocal rank of the first relevant hit within
// the first k (0 if none: trec_eval's recip_rank cut at k, as BEIR reports it); P@k divides by
// k even when fewer are retrieved; MAP@k is trec_eval's map_cut.k. It fails on
// an unknown metric name, on qrels without any relevant document, and on a doc id listed twice
// for one query of the run.
func Evaluate(run Run, qrels map[string]map[string]int, metrics []string) (map[string]float64, error) {
	per, err := PerQuery(run, qrels, metrics)
	if err != nil {
		return nil, err
	}
	qids := make([]string, 0, len(per))
	for q := range per {
		qids = append(qids, q)
	}
	slices.Sort(qids) // fixed summation order
	out := make(map[string]float64, len(metrics))
	for _, name := range metrics {
		var sum float64
		for _, q := range qids {
			sum += per[q][name]
		}
		out[name] = sum / float64(len(qids))
	}
	return out, nil
}

// PerQuery returns query id -> metric name -> value for every evaluated query. Errors are
// those of Evaluate.
func PerQuery(run Run, qrels map[string]map[string]int, metrics []string) (map[string]map[string]float64, error) {
	ms, err := parseMetrics(metrics)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]float64)
	for q, judged := range qrels {
		nrel := 0
		for _, s := range judged {
			if s > 0 {
				nrel++
			}
		}
		if nrel == 0 {
			continue
		}
		ranked, err := trecOrder(q, run[q])
		if err != nil {
			return nil, err
		}
		vals := make(map[string]float64, len(ms))
		for _, m := range ms {
			vals[m.name] = m.eval(ranked, judged, nrel)
		}
		out[q] = vals
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("eval: no query of the qrels has a relevant document")
	}
	return out, nil
}

// trecOrder returns the doc ids of hits sorted as trec_eval does: score descending, ties by
// doc id descending.
func trecOrder(q string, hits []index.Hit) ([]string, error) {
	sorted := slices.Clone(hits)
	slices.SortFunc(sorted, func(a, b index.Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return strings.Compare(b.DocID, a.DocID)
	})
	ids := make([]string, len(sorted))
	seen := make(map[string]bool, len(sorted))
	for i, h := range sorted {
		if math.IsNaN(h.Score) {
			return nil, fmt.Errorf("eval: query %q: doc %q has a NaN score", q, h.DocID)
		}
		if seen[h.DocID] {
			return nil, fmt.Errorf("eval: query %q: doc %q retrieved twice", q, h.DocID)
		}
		seen[h.DocID] = true
		ids[i] = h.DocID
	}
	return ids, nil
}

// eval computes one metric for one query; ranked is in trec_eval order, judged the query's
// qrels, nrel > 0 its number of relevant documents.
func (m metric) eval(ranked []string, judged map[string]int, nrel int) float64 {
	depth := len(ranked)
	if m.k > 0 {
		depth = min(m.k, depth)
	}
	top := ranked[:depth]
	switch m.kind {
	case "ndcg":
		return ndcg(top, judged, m.k)
	case "mrr":
		for i, d := range top {
			if judged[d] > 0 {
				return 1 / float64(i+1)
			}
		}
		return 0
	case "recall":
		return float64(countRelevant(top, judged)) / float64(nrel)
	case "p":
		return float64(countRelevant(top, judged)) / float64(m.k)
	case "map":
		var sum float64
		found := 0
		for i, d := range top {
			if judged[d] > 0 {
				found++
				sum += float64(found) / float64(i+1)
			}
		}
		return sum / float64(nrel)
	}
	panic("eval: unreachable metric kind " + m.kind)
}

func countRelevant(top []string, judged map[string]int) int {
	n := 0
	for _, d := range top {
		if judged[d] > 0 {
			n++
		}
	}
	return n
}

// ndcg is trec_eval's ndcg_cut.k (Järvelin and Kekäläinen, "Cumulated gain-based evaluation of
// IR techniques", TOIS 2002, with the log2(rank+1) discount of Burges et al. 2005):
//
//	DCG@k  = sum_{r=1..k} gain(doc at rank r) / log2(r + 1),  gain = judged score if > 0, else 0
//	nDCG@k = DCG@k / IDCG@k
//
// where IDCG@k is the DCG@k of all relevant judged documents sorted by gain descending.
func ndcg(top []string, judged map[string]int, k int) float64 {
	var dcg float64
	for i, d := range top {
		if g := judged[d]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	gains := make([]int, 0, len(judged))
	for _, g := range judged {
		if g > 0 {
			gains = append(gains, g)
		}
	}
	slices.Sort(gains)
	slices.Reverse(gains)
	var idcg float64
	for i, g := range gains[:min(k, len(gains))] {
		idcg += float64(g) / math.Log2(float64(i+2))
	}
	return dcg / idcg
}
