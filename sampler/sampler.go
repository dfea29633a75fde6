package sampler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// Collection is what the sampler resolves ids against.
type Collection struct {
	Queries  map[string]string         // query id -> text
	DocIDs   []string                  // corpus ids, in a fixed order (random fills index into it)
	DocTexts []string                  // passage texts, parallel to DocIDs
	Qrels    map[string]map[string]int // training judgements; score > 0 is relevant
	// DocText, when DocTexts is nil, returns the text of passage i of DocIDs (a corpus kept on
	// disk: the texts are read as batches need them).
	DocText func(i int) string
}

// text returns the text of passage i.
func (c *Collection) text(i int) string {
	if c.DocTexts == nil && c.DocText != nil {
		return c.DocText(i)
	}
	return c.DocTexts[i]
}

// Options configure batching.
type Options struct {
	BatchSize     int    // B, examples per batch (train.batch_size); at most the number of distinct queries
	HardNegatives int    // N, hard negatives per example in a batch (sampler.hard_negatives), >= 0
	Seed          uint64 // the recipe seed
	// MaskFalseNegatives, instead of keeping false negatives out of batches (deferring the
	// examples that would bring them), lets them in and zeroes them in Batch.Mask for the loss
	// to ignore. Needed when the judgements overlap so much that batches of B cannot be packed
	// (New says so); only duplicate queries are then deferred.
	MaskFalseNegatives bool
}

// Batch is one training batch: B queries, B positives and B·N hard negatives, ids and texts.
// For InfoNCE with in-batch negatives, query i's candidates are all B positives and all B·N
// negatives; its own positive is PositiveIDs[i], its own hard negatives are
// NegativeIDs[i*N : (i+1)*N]. A document may fill more than one slot (two queries can share a
// hard negative); it is never judged relevant to a query it is a negative for.
type Batch struct {
	Step        int
	N           int      // hard negatives per example
	QueryIDs    []string // B
	PositiveIDs []string // B
	NegativeIDs []string // B·N, row-major by example
	Queries     []string // B query texts
	Positives   []string // B passage texts
	Negatives   []string // B·N passage texts
	// Mask is B × C, C = B + B·N, row-major: Mask[i·C + j] is 1 when candidate j (j < B:
	// positive j; j >= B: negative j-B) may serve query i, 0 when it is a false negative (a
	// document judged relevant to query i other than its own positive slot). All ones unless
	// Options.MaskFalseNegatives.
	Mask []float32
}

// Stats reports how a batch's epoch was packed; nothing is skipped without being counted.
type Stats struct {
	Epoch int // epoch the batch belongs to
	Index int // position of the batch in its epoch, 0 .. BatchesPerEpoch-1
	// DuplicateQueries counts examples this batch turned away because their query was already in it.
	DuplicateQueries int
	// FalseNegativesAvoided counts examples this batch turned away because one of their documents
	// is judged relevant to a query already in it, or a document already in it is judged
	// relevant to their query (it would have served as a false negative). A turned-away example
	// goes on to the next batch of the epoch.
	FalseNegativesAvoided int
	// Repeated counts slots of this batch filled, after the first pass, with an example already
	// dealt this epoch (only when conflicts left the batch short).
	Repeated int
	// RandomNegatives counts hard-negative slots filled with random corpus documents because the
	// example had fewer than N mined negatives.
	RandomNegatives int
	// MaskedFalseNegatives counts the zeros of Batch.Mask (always 0 without MaskFalseNegatives).
	MaskedFalseNegatives int
	// LeftOver counts the examples of this epoch that no batch took (the E mod B that do not
	// fit, and those that conflicted with every batch); the same for every batch of the epoch.
	LeftOver int
}

// Sampler deals batches deterministically from (seed, step). Epoch e is the permutation of the E
// examples drawn from PCG(seed, e), packed into K = floor(E/B) batches first-fit: each example,
// in permutation order, goes into the first batch that is not full, does not hold its query and
// would not gain a false negative from it (see Stats; with Options.MaskFalseNegatives false
// negatives are let in and masked instead); an example no batch takes is left over for this
// epoch. Batches still short after that pass are topped up with compatible examples in
// permutation order from position k·B on (Stats.Repeated). Step s is batch s mod K of epoch
// s / K, so Batch(s) depends on nothing but (examples, collection, options, s): a resumed run
// replays the same batches from its step counter. Without conflicts an epoch deals every example
// once, in permutation order. A Sampler is safe for concurrent use.
type Sampler struct {
	c        Collection
	examples []Example
	opts     Options
	docIndex map[string]int

	mu    sync.Mutex
	cache map[int]*epochPlan // at most two epochs
}

// indexDocs maps each corpus id to its position in ids; an id that appears twice is an error.
func indexDocs(ids []string) (map[string]int, error) {
	m := make(map[string]int, len(ids))
	for i, id := range ids {
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("sampler: corpus id %q appears twice", id)
		}
		m[id] = i
	}
	return m, nil
}

// New checks the examples against the collection, packs epoch 0 and returns a Sampler. Errors:
// B < 1, N < 0, fewer distinct queries than B, epoch 0 not packing into batches of B compatible
// examples (judgements overlapping too much for B; the error names the largest B that packs and
// MaskFalseNegatives is the way out), an example whose query has no text, whose documents are
// not in the corpus, whose positive is not judged relevant to its query or one of whose
// negatives is, duplicate corpus ids, and DocTexts not parallel to DocIDs.
func New(c Collection, examples []Example, opts Options) (*Sampler, error) {
	switch {
	case opts.BatchSize < 1:
		return nil, fmt.Errorf("sampler: batch size %d, want >= 1", opts.BatchSize)
	case opts.HardNegatives < 0:
		return nil, fmt.Errorf("sampler: hard negatives %d, want >= 0", opts.HardNegatives)
	case len(c.DocIDs) != len(c.DocTexts) && (c.DocTexts != nil || c.DocText == nil):
		return nil, fmt.Errorf("sampler: %d document ids but %d texts", len(c.DocIDs), len(c.DocTexts))
	case len(examples) == 0:
		return nil, errors.New("sampler: no training examples")
	}
	docIndex, err := indexDocs(c.DocIDs)
	if err != nil {
		return nil, err
	}
	s := &Sampler{c: c, examples: examples, opts: opts, docIndex: docIndex}
	queries := map[string]bool{}
	for i, ex := range examples {
		if _, ok := c.Queries[ex.QueryID]; !ok {
			return nil, fmt.Errorf("sampler: example %d: query %q has no text", i, ex.QueryID)
		}
		queries[ex.QueryID] = true
		if _, ok := s.docIndex[ex.PositiveID]; !ok {
			return nil, fmt.Errorf("sampler: example %d (query %q): positive %q is not in the corpus", i, ex.QueryID, ex.PositiveID)
		}
		if c.Qrels[ex.QueryID][ex.PositiveID] <= 0 {
			return nil, fmt.Errorf("sampler: example %d (query %q): positive %q is not judged relevant", i, ex.QueryID, ex.PositiveID)
		}
		for _, d := range ex.NegativeIDs {
			if _, ok := s.docIndex[d]; !ok {
				return nil, fmt.Errorf("sampler: example %d (query %q): negative %q is not in the corpus", i, ex.QueryID, d)
			}
			if c.Qrels[ex.QueryID][d] > 0 {
				return nil, fmt.Errorf("sampler: example %d (query %q): negative %q is judged relevant to the query", i, ex.QueryID, d)
			}
		}
	}
	if len(queries) < opts.BatchSize {
		return nil, fmt.Errorf("sampler: batch size %d exceeds the %d distinct training queries (a batch never holds a query twice)", opts.BatchSize, len(queries))
	}
	if _, err := s.plan(0); err != nil {
		largest := 0
		for b := opts.BatchSize - 1; b >= 1 && largest == 0; b-- {
			o := opts
			o.BatchSize = b
			trial := &Sampler{c: c, examples: examples, opts: o, docIndex: s.docIndex}
			if _, err := trial.plan(0); err == nil {
				largest = b
			}
		}
		return nil, fmt.Errorf("sampler: batch size %d: %w (the judgements overlap too much; the largest batch size that packs epoch 0 is %d; or set MaskFalseNegatives)", opts.BatchSize, err, largest)
	}
	return s, nil
}

// Examples returns the examples the sampler deals, in the order given to New.
func (s *Sampler) Examples() []Example { return slices.Clone(s.examples) }

// BatchesPerEpoch returns K = floor(E / B).
func (s *Sampler) BatchesPerEpoch() int { return len(s.examples) / s.opts.BatchSize }

// Epoch returns the epoch of step's batch.
func (s *Sampler) Epoch(step int) int { return step / s.BatchesPerEpoch() }

// candidate is an example with the negatives it uses at its place in an epoch.
type candidate struct {
	ex   Example
	negs []string
}

// packing is one batch being packed.
type packing struct {
	chosen  []candidate
	queries map[string]bool
	docs    map[string]bool
}

type epochPlan struct {
	batches [][]candidate
	stats   []Stats
}

// Batch returns the batch of a step (0-based) and how its epoch was packed. It fails only when
// conflicts leave a batch short of B compatible examples even after topping up (New checks
// epoch 0; a later epoch's permutation can still fail when B is close to the largest that packs).
func (s *Sampler) Batch(step int) (Batch, Stats, error) {
	if step < 0 {
		return Batch{}, Stats{}, fmt.Errorf("sampler: step %d, want >= 0", step)
	}
	K := s.BatchesPerEpoch()
	e, k := step/K, step%K
	p, err := s.plan(e)
	if err != nil {
		return Batch{}, Stats{}, fmt.Errorf("sampler: step %d: %w", step, err)
	}
	chosen, st := slices.Clone(p.batches[k]), p.stats[k]
	N := s.opts.HardNegatives

	// fill examples with fewer than N mined negatives with random documents that are judged
	// relevant to no query of the batch
	fill := rand.New(rand.NewPCG(s.opts.Seed^saltFill, uint64(step)))
	for i := range chosen {
		c := &chosen[i]
		if len(c.negs) >= N {
			continue
		}
		c.negs = slices.Clone(c.negs)
		for tries := 0; len(c.negs) < N; tries++ {
			if tries > 100*N+len(s.c.DocIDs) {
				return Batch{}, st, fmt.Errorf("sampler: step %d: no random negative found for query %q", step, c.ex.QueryID)
			}
			d := s.c.DocIDs[fill.IntN(len(s.c.DocIDs))]
			if slices.Contains(c.negs, d) || s.relevantToAny(d, chosen) {
				continue
			}
			c.negs = append(c.negs, d)
			st.RandomNegatives++
		}
	}

	B := s.opts.BatchSize
	b := Batch{Step: step, N: N,
		QueryIDs: make([]string, B), PositiveIDs: make([]string, B), NegativeIDs: make([]string, 0, B*N),
		Queries: make([]string, B), Positives: make([]string, B), Negatives: make([]string, 0, B*N)}
	for i, c := range chosen {
		b.QueryIDs[i], b.PositiveIDs[i] = c.ex.QueryID, c.ex.PositiveID
		b.Queries[i], b.Positives[i] = s.c.Queries[c.ex.QueryID], s.c.text(s.docIndex[c.ex.PositiveID])
		for _, d := range c.negs {
			b.NegativeIDs = append(b.NegativeIDs, d)
			b.Negatives = append(b.Negatives, s.c.text(s.docIndex[d]))
		}
	}
	if s.opts.MaskFalseNegatives {
		b.Mask = FalseNegativeMask(b, s.c.Qrels)
		for _, m := range b.Mask {
			if m == 0 {
				st.MaskedFalseNegatives++
			}
		}
	} else { // packing kept false negatives out: every candidate serves (ValidateBatch checks it)
		b.Mask = make([]float32, B*(B+B*N))
		for i := range b.Mask {
			b.Mask[i] = 1
		}
	}
	return b, st, nil
}

// FalseNegativeMask returns the B × (B + B·N) mask of a batch (see Batch.Mask) under qrels.
func FalseNegativeMask(b Batch, qrels map[string]map[string]int) []float32 {
	B := len(b.QueryIDs)
	C := B + len(b.NegativeIDs)
	mask := make([]float32, B*C)
	for i, q := range b.QueryIDs {
		rel := qrels[q]
		for j := range C {
			d := ""
			if j < B {
				d = b.PositiveIDs[j]
			} else {
				d = b.NegativeIDs[j-B]
			}
			if j == i || rel[d] <= 0 {
				mask[i*C+j] = 1
			}
		}
	}
	return mask
}

// plan packs epoch e (memoised; a pure function of the seed and e).
func (s *Sampler) plan(e int) (*epochPlan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.cache[e]; ok {
		return p, nil
	}
	B, E, K := s.opts.BatchSize, len(s.examples), s.BatchesPerEpoch()
	perm := rand.New(rand.NewPCG(s.opts.Seed, uint64(e))).Perm(E)
	cands := make([]candidate, E)
	for pos, i := range perm {
		cands[pos] = candidate{ex: s.examples[i], negs: s.negatives(s.examples[i], e*E+pos)}
	}
	bs := make([]packing, K)
	st := make([]Stats, K)
	for k := range bs {
		bs[k] = packing{queries: map[string]bool{}, docs: map[string]bool{}}
		st[k].Epoch, st[k].Index = e, k
	}
	left, first := 0, 0
	for _, c := range cands {
		for first < K && len(bs[first].chosen) == B {
			first++
		}
		placed := false
		for k := first; k < K && !placed; k++ {
			switch {
			case len(bs[k].chosen) == B:
			case bs[k].queries[c.ex.QueryID]:
				st[k].DuplicateQueries++
			case !s.opts.MaskFalseNegatives && s.conflicts(c, &bs[k]):
				st[k].FalseNegativesAvoided++
			default:
				bs[k].add(c)
				placed = true
			}
		}
		if !placed {
			left++
		}
	}
	p := &epochPlan{batches: make([][]candidate, K), stats: st}
	for k := range bs {
		// top up from the batch's own stretch of the permutation onwards, so that repeats spread
		for j := range E {
			c := cands[(k*B+j)%E]
			if len(bs[k].chosen) == B {
				break
			}
			if !bs[k].queries[c.ex.QueryID] && (s.opts.MaskFalseNegatives || !s.conflicts(c, &bs[k])) {
				bs[k].add(c)
				st[k].Repeated++
			}
		}
		if len(bs[k].chosen) < B {
			return nil, fmt.Errorf("epoch %d, batch %d: only %d of %d examples fit together without a repeated query or a false negative", e, k, len(bs[k].chosen), B)
		}
		st[k].LeftOver = left
		p.batches[k] = bs[k].chosen
	}
	if s.cache == nil || len(s.cache) >= 2 {
		s.cache = map[int]*epochPlan{}
	}
	s.cache[e] = p
	return p, nil
}

func (b *packing) add(c candidate) {
	b.chosen = append(b.chosen, c)
	b.queries[c.ex.QueryID] = true
	b.docs[c.ex.PositiveID] = true
	for _, d := range c.negs {
		b.docs[d] = true
	}
}

// negatives returns the N negatives an example uses at position pos of the stream of epochs
// (e·E + position in epoch e's permutation): all its mined negatives when it has at most N, else
// N of them drawn from PCG(seed ^ salt, pos), in mined order.
func (s *Sampler) negatives(ex Example, pos int) []string {
	N := s.opts.HardNegatives
	if len(ex.NegativeIDs) <= N {
		return slices.Clone(ex.NegativeIDs)
	}
	r := rand.New(rand.NewPCG(s.opts.Seed^saltNegatives, uint64(pos)))
	idx := r.Perm(len(ex.NegativeIDs))[:N]
	slices.Sort(idx)
	out := make([]string, N)
	for i, k := range idx {
		out[i] = ex.NegativeIDs[k]
	}
	return out
}

// conflicts reports whether adding c to b would make a document judged relevant to some query of
// the batch a negative of that query.
func (s *Sampler) conflicts(c candidate, b *packing) bool {
	for d, score := range s.c.Qrels[c.ex.QueryID] {
		if score > 0 && b.docs[d] {
			return true
		}
	}
	for _, o := range b.chosen {
		rel := s.c.Qrels[o.ex.QueryID]
		if rel[c.ex.PositiveID] > 0 {
			return true
		}
		for _, d := range c.negs {
			if rel[d] > 0 {
				return true
			}
		}
	}
	return false
}

func (s *Sampler) relevantToAny(d string, chosen []candidate) bool {
	for _, o := range chosen {
		if s.c.Qrels[o.ex.QueryID][d] > 0 {
			return true
		}
	}
	return false
}

// ValidateBatch checks the invariants of a supervised batch: B > 0 queries, as many positives,
// B·N negatives (and texts, when present, parallel to the ids), no query twice, every positive
// judged relevant to its own query, and no false negative: for every query i, no document of the
// batch other than its own positive (any other positive, any hard negative, its own included) is
// judged relevant to it (qrels score > 0), unless b.Mask is set, in which case the mask must be
// exactly FalseNegativeMask(b, qrels), zeroing every such candidate.
func ValidateBatch(b Batch, qrels map[string]map[string]int) error {
	B := len(b.QueryIDs)
	switch {
	case B == 0:
		return fmt.Errorf("batch %d: no queries", b.Step)
	case len(b.PositiveIDs) != B:
		return fmt.Errorf("batch %d: %d queries but %d positives", b.Step, B, len(b.PositiveIDs))
	case len(b.NegativeIDs) != B*b.N:
		return fmt.Errorf("batch %d: %d negatives, want B·N = %d·%d", b.Step, len(b.NegativeIDs), B, b.N)
	case b.Queries != nil && len(b.Queries) != B, b.Positives != nil && len(b.Positives) != B,
		b.Negatives != nil && len(b.Negatives) != len(b.NegativeIDs):
		return fmt.Errorf("batch %d: texts not parallel to ids (%d, %d, %d)", b.Step, len(b.Queries), len(b.Positives), len(b.Negatives))
	}
	seen := map[string]int{}
	for i, q := range b.QueryIDs {
		if j, dup := seen[q]; dup {
			return fmt.Errorf("batch %d: query %q at rows %d and %d", b.Step, q, j, i)
		}
		seen[q] = i
		if qrels[q][b.PositiveIDs[i]] <= 0 {
			return fmt.Errorf("batch %d: positive %q of query %q is not judged relevant to it", b.Step, b.PositiveIDs[i], q)
		}
	}
	if b.Mask != nil {
		want := FalseNegativeMask(b, qrels)
		if len(b.Mask) != len(want) {
			return fmt.Errorf("batch %d: mask of %d values, want B·(B+B·N) = %d", b.Step, len(b.Mask), len(want))
		}
		for k := range want {
			if b.Mask[k] != want[k] {
				C := len(want) / B
				return fmt.Errorf("batch %d: mask[%d][%d] = %v, want %v", b.Step, k/C, k%C, b.Mask[k], want[k])
			}
		}
		return nil // false negatives are masked out
	}
	for i, q := range b.QueryIDs {
		rel := qrels[q]
		for j, d := range b.PositiveIDs {
			if j != i && rel[d] > 0 {
				return fmt.Errorf("batch %d: positive %q of query %q is judged relevant to query %q, whose negative it would be",
					b.Step, d, b.QueryIDs[j], q)
			}
		}
		for k, d := range b.NegativeIDs {
			if rel[d] > 0 {
				return fmt.Errorf("batch %d: hard negative %q of query %q is judged relevant to query %q",
					b.Step, d, b.QueryIDs[k/max(b.N, 1)], q)
			}
		}
	}
	return nil
}
