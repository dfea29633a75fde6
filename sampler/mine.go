package sampler

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/ragtrain/ragtrain/data"
)

// Example is one supervised training example: a query, one document judged relevant to it, and
// hard negatives (documents not judged relevant to it), best-ranked first.
type Example struct {
	QueryID     string
	PositiveID  string
	NegativeIDs []string
}

// Strategy says which eligible documents of the mining window become hard negatives.
type Strategy string

const (
	// Top takes the first n eligible documents of the window, in rank order.
	Top Strategy = "top"
	// Random takes n eligible documents of the window drawn uniformly without replacement.
	Random Strategy = "random"
)

// MineOptions configure hard-negative mining (recipe [sampler]).
type MineOptions struct {
	Negatives int      // n, hard negatives per example (hard_negatives)
	Lo, Hi    int      // window of 1-based ranks, inclusive (negative_window = [Lo, Hi])
	Strategy  Strategy // Top or Random (negative_strategy)
	Seed      uint64   // for Random; the draw for an example depends on (Seed, query id, positive id) only
	// Filter, when set, drops false-negative candidates of the window by score (see Filter).
	Filter *Filter
}

// Filter drops mined candidates that score so close to an example's positive that they are
// likely unlabelled positives (false negatives). Score(q, d) is the mining model's score of a
// document for a query, and it must score every positive and every window candidate. A candidate
// d of the example (q, p) is dropped by the margin when Margin > 0 and s(q,d) > s(q,p) - Margin
// (an absolute margin), else by the ratio when Relative > 0 and s(q,d) > Relative · s(q,p)
// (NV-Retriever's TopK-PercPos, Moreira et al. 2024, with Relative = 0.95); 0 turns a rule off.
// The margin is checked first, so a candidate counts against one rule only.
type Filter struct {
	Margin, Relative float64
	Score            func(q, d string) (float64, error)
}

// drops reports which rule, if any, drops candidate d of example (q, p): 1 margin, 2 ratio.
func (f *Filter) drops(sPos, sNeg float64) int {
	switch {
	case f.Margin > 0 && sNeg > sPos-f.Margin:
		return 1
	case f.Relative > 0 && sNeg > f.Relative*sPos:
		return 2
	}
	return 0
}

// MineStats reports what mining found; nothing is dropped without being counted here.
type MineStats struct {
	Queries  int // training queries with at least one relevant document
	Examples int // one per (query, relevant document)
	// ExcludedRelevant counts, over queries, documents in the window skipped because they are
	// judged relevant to the query (score > 0).
	ExcludedRelevant int
	// Short lists the queries with fewer than n eligible documents in the window (the window
	// extends past the end of the ranking, or holds many relevant documents). Their examples
	// get every eligible document; Missing is the total shortfall over examples.
	Short   []Shortfall
	Missing int
	// DroppedMargin and DroppedRelative count, over examples, the window candidates that
	// MineOptions.Filter dropped by its margin and by its ratio (0 without a filter).
	DroppedMargin, DroppedRelative int
}

// Shortfall is a query whose mining window held fewer eligible documents than asked for.
type Shortfall struct {
	QueryID  string
	Eligible int
}

// Mine builds one Example per (training query, relevant document) pair and picks each example's
// hard negatives from that query's first-stage ranking (e.g. BM25 top Hi).
//
// qrels are the training judgements (query id -> doc id -> score; score > 0 is relevant, 0 is
// judged non-relevant and may be a negative); every query with a relevant document is a training
// query. ranking maps each training query to its ranked document ids, best first. The window is
// ranks Lo..Hi of that list (1-based, inclusive); a document is eligible when it is not judged
// relevant to the query. Top takes the first n eligible, Random draws n uniformly without
// replacement from all eligible in the window (independently per example), and both return them
// in rank order. With fewer than n eligible, every eligible document is taken and the query is
// listed in MineStats.Short (the batch sampler then fills the gap with random documents, see
// Sampler).
//
// Examples come sorted by query id, then positive id (numerically when both ids are integers).
// Errors: n < 0, a window with Lo < 1 or Hi < Lo, an unknown strategy, a training query without
// a ranking (when n > 0), and a ranking that lists a document twice.
func Mine(qrels map[string]map[string]int, ranking map[string][]string, o MineOptions) ([]Example, MineStats, error) {
	var st MineStats
	switch {
	case o.Negatives < 0:
		return nil, st, fmt.Errorf("sampler: hard_negatives = %d, want >= 0", o.Negatives)
	case o.Lo < 1 || o.Hi < o.Lo:
		return nil, st, fmt.Errorf("sampler: negative_window = [%d, %d], want 1 <= lo <= hi", o.Lo, o.Hi)
	case o.Strategy != Top && o.Strategy != Random:
		return nil, st, fmt.Errorf("sampler: negative_strategy = %q, want %q or %q", o.Strategy, Top, Random)
	}
	queries := data.Qrels(qrels).QueryIDs() // those with a relevant document
	slices.SortFunc(queries, compareIDs)
	if len(queries) == 0 {
		return nil, st, errors.New("sampler: no query has a relevant document (score > 0)")
	}

	var out []Example
	for _, q := range queries {
		rel := qrels[q]
		var eligible []string
		if o.Negatives > 0 {
			ranked, ok := ranking[q]
			if !ok {
				return nil, st, fmt.Errorf("sampler: no mining ranking for training query %q", q)
			}
			seen := make(map[string]int, len(ranked))
			for i, d := range ranked {
				if r, dup := seen[d]; dup {
					return nil, st, fmt.Errorf("sampler: ranking of query %q lists document %q twice (ranks %d and %d)", q, d, r, i+1)
				}
				seen[d] = i + 1
			}
			for r := o.Lo; r <= o.Hi && r <= len(ranked); r++ {
				d := ranked[r-1]
				if rel[d] > 0 {
					st.ExcludedRelevant++
					continue
				}
				eligible = append(eligible, d)
			}
			if len(eligible) < o.Negatives {
				st.Short = append(st.Short, Shortfall{QueryID: q, Eligible: len(eligible)})
			}
		}
		var pos []string
		for d, s := range rel {
			if s > 0 {
				pos = append(pos, d)
			}
		}
		slices.SortFunc(pos, compareIDs)
		st.Queries++
		for _, p := range pos {
			cands := eligible
			if o.Filter != nil && len(eligible) > 0 {
				var err error
				if cands, err = o.filter(&st, q, p, eligible); err != nil {
					return nil, st, err
				}
			}
			negs := pick(cands, o, q, p)
			st.Missing += o.Negatives - len(negs)
			out = append(out, Example{QueryID: q, PositiveID: p, NegativeIDs: negs})
		}
	}
	st.Examples = len(out)
	return out, st, nil
}

// filter returns the candidates of example (q, p) that o.Filter keeps, counting the others.
func (o MineOptions) filter(st *MineStats, q, p string, eligible []string) ([]string, error) {
	sPos, err := o.Filter.Score(q, p)
	if err != nil {
		return nil, fmt.Errorf("sampler: score of positive %q of query %q: %w", p, q, err)
	}
	kept := make([]string, 0, len(eligible))
	for _, d := range eligible {
		sNeg, err := o.Filter.Score(q, d)
		if err != nil {
			return nil, fmt.Errorf("sampler: score of candidate %q of query %q: %w", d, q, err)
		}
		switch o.Filter.drops(sPos, sNeg) {
		case 1:
			st.DroppedMargin++
		case 2:
			st.DroppedRelative++
		default:
			kept = append(kept, d)
		}
	}
	return kept, nil
}

// pick chooses min(n, len(eligible)) documents by the strategy, in rank order.
func pick(eligible []string, o MineOptions, q, p string) []string {
	n := min(o.Negatives, len(eligible))
	if o.Strategy == Top || n == len(eligible) {
		return slices.Clone(eligible[:n])
	}
	r := rand.New(rand.NewPCG(o.Seed^saltMine, exampleKey(q, p)))
	idx := make([]int, len(eligible))
	for i := range idx {
		idx[i] = i
	}
	for i := range n { // partial Fisher-Yates: idx[:n] is a uniform n-subset
		j := i + r.IntN(len(idx)-i)
		idx[i], idx[j] = idx[j], idx[i]
	}
	chosen := idx[:n]
	slices.Sort(chosen)
	out := make([]string, n)
	for i, k := range chosen {
		out[i] = eligible[k]
	}
	return out
}

// exampleKey hashes (query id, positive id) with FNV-1a, so an example's draw does not depend on
// which other examples exist.
func exampleKey(q, p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(q))
	h.Write([]byte{0})
	h.Write([]byte(p))
	return h.Sum64()
}

// compareIDs orders ids numerically when both are integers, else as strings (integers first).
func compareIDs(a, b string) int {
	x, errA := strconv.ParseInt(a, 10, 64)
	y, errB := strconv.ParseInt(b, 10, 64)
	switch {
	case errA == nil && errB == nil:
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}

// Salts separate the random streams drawn from one seed: the epoch permutation uses PCG(seed,
// epoch) itself (salt 0), the others PCG(seed ^ salt, ...).
const (
	saltMine      = 0x6d696e652d6e6567 // "mine-neg"
	saltNegatives = 0x62617463682d6e67 // "batch-ng"
	saltFill      = 0x66696c6c2d6e6567 // "fill-neg"
	saltCrop      = 0x63726f702d706169 // "crop-pai"
)
