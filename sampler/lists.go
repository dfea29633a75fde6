package sampler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Reranker training lists.
//
// A reranker (cross-encoder) learns from candidate lists: per training query, K passages of its
// first-stage ranking with their graded labels, scored together by a pairwise, listwise or
// pointwise loss. Every list holds exactly one judged-relevant passage, in slot 0 (drawn
// uniformly from the passages the qrels judge relevant to the query, retrieved or not), and
// K-1 negatives drawn uniformly without replacement from the query's first-stage top-N (the
// ranking given to NewLists), excluding every passage judged relevant to the query: unjudged
// candidates count as negatives, as do those judged non-relevant (score 0). With one positive
// per list, every (slot 0, slot j) pair is a (positive, negative) pair, so the K-1 pairs of a
// list and the label distribution of the listwise loss are defined with a fixed shape.
//
// False negatives. An unjudged candidate that the first stage ranks above every judged-relevant
// one is often relevant but unjudged (Cranfield judged a pool, not the collection). With
// ListOptions.DropAboveFirstPositive such candidates are not used as negatives, a rank-based
// stand-in for RocketQA's denoised hard negatives (Qu et al. 2021, which ask a cross-encoder
// instead); candidates judged non-relevant stay, being known negatives. A ranking with no
// judged-relevant passage drops nothing.

// ListOptions configure reranker training lists (recipe [rerank] and [train]).
type ListOptions struct {
	Size      int    // K, passages per list (rerank.list_size), >= 2
	BatchSize int    // lists per batch (train.batch_size), >= 1 and at most the training queries
	Seed      uint64 // the recipe seed
	// DropAboveFirstPositive removes the unjudged candidates ranked above the query's first
	// judged-relevant one from its negatives (rerank.drop_above_first_positive).
	DropAboveFirstPositive bool
}

// ListStats reports how the negatives were prepared; nothing is dropped without being counted.
type ListStats struct {
	Queries    int // training queries (with a judged-relevant passage), one list each per epoch
	Candidates int // first-stage candidates over all training queries (the rankings' lengths)
	// Relevant counts the candidates judged relevant to their query (never negatives).
	Relevant int
	// Dropped counts the unjudged candidates removed as suspected false negatives.
	Dropped int
	// NoRelevant lists the training queries whose ranking holds no judged-relevant passage
	// (nothing dropped for them; their positives come from the qrels alone).
	NoRelevant []string
	// Short lists the queries with fewer than K-1 negatives left; each of their lists fills
	// the gap with random corpus passages not judged relevant to the query (ListBatch.RandomFills).
	Short []Shortfall
}

// ListBatch is one batch of B lists of K passages, row-major by list: passage j of list i is
// DocIDs[i*K+j]. Slot 0 of every list is its judged-relevant passage.
type ListBatch struct {
	Step     int
	K        int
	QueryIDs []string // B
	Queries  []string // B query texts
	DocIDs   []string // B*K
	Passages []string // B*K passage texts
	// Labels are the graded labels, B*K: the qrels score of slot 0 (> 0), 0 for the negatives.
	Labels []int
	// RandomFills counts negative slots filled with random corpus passages (see ListStats.Short).
	RandomFills int
}

// PairQueries returns the B*K query texts that pair with Passages (query i repeated K times),
// as a cross-encoder batch reads them.
func (b ListBatch) PairQueries() []string {
	out := make([]string, 0, len(b.Passages))
	for _, q := range b.Queries {
		for range b.K {
			out = append(out, q)
		}
	}
	return out
}

// Lists deals reranker training lists deterministically from (seed, step): epoch e is the
// permutation of the Q training queries drawn from PCG(seed ^ salt, e), cut into floor(Q/B)
// batches; step s is batch s mod floor(Q/B) of epoch s / floor(Q/B), and its lists draw their
// passages from PCG(seed ^ salt', s). A resumed run replays the same lists from its step counter.
// A Lists is read-only after NewLists and safe for concurrent use.
type Lists struct {
	c        Collection
	o        ListOptions
	docIndex map[string]int
	queries  []string            // training queries, sorted
	pos      map[string][]string // query -> judged-relevant passages, sorted
	negs     map[string][]string // query -> negatives, in rank order
}

// NewLists prepares the negatives of every training query (every query of c.Qrels with a
// judged-relevant passage) from ranking, its first-stage top-N doc ids, best first.
//
// Errors: K < 2, B < 1, more lists per batch than training queries, a training query without
// text or without a ranking, a ranking listing a passage twice or naming one that is not in the
// corpus, a judged-relevant passage missing from the corpus, DocTexts not parallel to DocIDs
// and duplicate corpus ids.
func NewLists(c Collection, ranking map[string][]string, o ListOptions) (*Lists, ListStats, error) {
	var st ListStats
	switch {
	case o.Size < 2:
		return nil, st, fmt.Errorf("sampler: list size %d, want >= 2 (a positive and a negative)", o.Size)
	case o.BatchSize < 1:
		return nil, st, fmt.Errorf("sampler: lists per batch %d, want >= 1", o.BatchSize)
	case len(c.DocIDs) != len(c.DocTexts):
		return nil, st, fmt.Errorf("sampler: %d document ids but %d texts", len(c.DocIDs), len(c.DocTexts))
	}
	docIndex, err := indexDocs(c.DocIDs)
	if err != nil {
		return nil, st, err
	}
	l := &Lists{c: c, o: o, docIndex: docIndex, pos: map[string][]string{}, negs: map[string][]string{}}
	for q, rel := range c.Qrels {
		var pos []string
		for d, s := range rel {
			if s > 0 {
				pos = append(pos, d)
			}
		}
		if len(pos) == 0 {
			continue
		}
		slices.SortFunc(pos, compareIDs)
		for _, d := range pos {
			if _, ok := l.docIndex[d]; !ok {
				return nil, st, fmt.Errorf("sampler: query %q: relevant passage %q is not in the corpus", q, d)
			}
		}
		l.queries = append(l.queries, q)
		l.pos[q] = pos
	}
	slices.SortFunc(l.queries, compareIDs)
	if len(l.queries) == 0 {
		return nil, st, errors.New("sampler: no query has a relevant document (score > 0)")
	}
	if o.BatchSize > len(l.queries) {
		return nil, st, fmt.Errorf("sampler: %d lists per batch exceed the %d training queries (a batch never holds a query twice)", o.BatchSize, len(l.queries))
	}
	for _, q := range l.queries {
		if _, ok := c.Queries[q]; !ok {
			return nil, st, fmt.Errorf("sampler: training query %q has no text", q)
		}
		ranked, ok := ranking[q]
		if !ok {
			return nil, st, fmt.Errorf("sampler: no first-stage ranking for training query %q", q)
		}
		negs, dropped, found, err := l.negatives(q, ranked)
		if err != nil {
			return nil, st, err
		}
		st.Candidates += len(ranked)
		st.Relevant += found
		st.Dropped += dropped
		if found == 0 {
			st.NoRelevant = append(st.NoRelevant, q)
		}
		if len(negs) < o.Size-1 {
			st.Short = append(st.Short, Shortfall{QueryID: q, Eligible: len(negs)})
		}
		l.negs[q] = negs
	}
	st.Queries = len(l.queries)
	return l, st, nil
}

// negatives returns the query's negatives in rank order, how many unjudged candidates were
// dropped as suspected false negatives, and how many candidates are judged relevant.
func (l *Lists) negatives(q string, ranked []string) (negs []string, dropped, relevant int, err error) {
	rel := l.c.Qrels[q]
	seen := make(map[string]int, len(ranked))
	first := -1 // rank index of the first judged-relevant candidate
	for i, d := range ranked {
		if r, dup := seen[d]; dup {
			return nil, 0, 0, fmt.Errorf("sampler: ranking of query %q lists passage %q twice (ranks %d and %d)", q, d, r, i+1)
		}
		seen[d] = i + 1
		if _, ok := l.docIndex[d]; !ok {
			return nil, 0, 0, fmt.Errorf("sampler: ranking of query %q: passage %q (rank %d) is not in the corpus", q, d, i+1)
		}
		if rel[d] > 0 {
			relevant++
			if first < 0 {
				first = i
			}
		}
	}
	for i, d := range ranked {
		grade, judged := rel[d]
		switch {
		case grade > 0:
			continue
		case l.o.DropAboveFirstPositive && !judged && i < first:
			dropped++
			continue
		}
		negs = append(negs, d)
	}
	return negs, dropped, relevant, nil
}

// BatchesPerEpoch returns floor(Q / B).
func (l *Lists) BatchesPerEpoch() int { return len(l.queries) / l.o.BatchSize }

// Negatives returns the prepared negatives of training query q, in rank order (nil for a query
// that is not a training query).
func (l *Lists) Negatives(q string) []string { return slices.Clone(l.negs[q]) }

// Batch returns the lists of a step (0-based). It fails only for a negative step, or when a
// query's negatives are short and the corpus holds too few passages not judged relevant to it
// to fill its list.
func (l *Lists) Batch(step int) (ListBatch, error) {
	if step < 0 {
		return ListBatch{}, fmt.Errorf("sampler: step %d, want >= 0", step)
	}
	B, K := l.o.BatchSize, l.o.Size
	per := l.BatchesPerEpoch()
	e, k := step/per, step%per
	perm := rand.New(rand.NewPCG(l.o.Seed^saltListEpoch, uint64(e))).Perm(len(l.queries))
	r := rand.New(rand.NewPCG(l.o.Seed^saltListDraw, uint64(step)))
	b := ListBatch{Step: step, K: K,
		QueryIDs: make([]string, B), Queries: make([]string, B),
		DocIDs: make([]string, 0, B*K), Passages: make([]string, 0, B*K), Labels: make([]int, 0, B*K)}
	for i := range B {
		q := l.queries[perm[k*B+i]]
		b.QueryIDs[i], b.Queries[i] = q, l.c.Queries[q]
		pos := l.pos[q]
		p := pos[r.IntN(len(pos))]
		list := []string{p}
		negs := l.negs[q]
		n := min(K-1, len(negs))
		idx := r.Perm(len(negs))[:n]
		slices.Sort(idx) // rank order
		for _, j := range idx {
			list = append(list, negs[j])
		}
		for tries := 0; len(list) < K; tries++ {
			if tries > 100*K+len(l.c.DocIDs) {
				return ListBatch{}, fmt.Errorf("sampler: step %d: no random negative found for query %q", step, q)
			}
			d := l.c.DocIDs[r.IntN(len(l.c.DocIDs))]
			if l.c.Qrels[q][d] > 0 || slices.Contains(list, d) {
				continue
			}
			list = append(list, d)
			b.RandomFills++
		}
		b.appendList(list, l.c.DocTexts, l.docIndex, l.c.Qrels[q][p])
	}
	return b, nil
}

// appendList appends one list of passages to the batch: their ids, their texts (texts[docIndex[id]])
// and their labels, label0 on slot 0 (the positive) and 0 on the negatives.
func (b *ListBatch) appendList(list, texts []string, docIndex map[string]int, label0 int) {
	for j, d := range list {
		b.DocIDs = append(b.DocIDs, d)
		b.Passages = append(b.Passages, texts[docIndex[d]])
		label := 0
		if j == 0 {
			label = label0
		}
		b.Labels = append(b.Labels, label)
	}
}

// ValidateLists checks the invariants of a batch of lists under qrels: B lists of K distinct
// passages with parallel texts and labels, slot 0 judged relevant to the list's query and
// labelled with its grade, every other slot not judged relevant and labelled 0.
func ValidateLists(b ListBatch, qrels map[string]map[string]int) error {
	B, K := len(b.QueryIDs), b.K
	if K < 2 || len(b.Queries) != B || len(b.DocIDs) != B*K || len(b.Passages) != B*K || len(b.Labels) != B*K {
		return fmt.Errorf("sampler: step %d: %d queries, %d texts, %d passages, %d texts, %d labels for lists of %d",
			b.Step, B, len(b.Queries), len(b.DocIDs), len(b.Passages), len(b.Labels), K)
	}
	for i, q := range b.QueryIDs {
		list := b.DocIDs[i*K : (i+1)*K]
		for j, d := range list {
			g := qrels[q][d]
			switch {
			case slices.Contains(list[:j], d):
				return fmt.Errorf("sampler: step %d list %d (query %q): passage %q twice", b.Step, i, q, d)
			case j == 0 && (g <= 0 || b.Labels[i*K] != g):
				return fmt.Errorf("sampler: step %d list %d (query %q): slot 0 %q has grade %d, label %d; want a judged-relevant passage labelled with its grade", b.Step, i, q, d, g, b.Labels[i*K])
			case j > 0 && (g > 0 || b.Labels[i*K+j] != 0):
				return fmt.Errorf("sampler: step %d list %d (query %q): negative %q has grade %d, label %d", b.Step, i, q, d, g, b.Labels[i*K+j])
			}
		}
	}
	return nil
}

// Salts of the list streams (see mine.go for the others).
const (
	saltListEpoch = 0x6c6973742d657063 // "list-epc"
	saltListDraw  = 0x6c6973742d647277 // "list-drw"
)
