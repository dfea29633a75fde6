package sampler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Cropping lists: label-free pretraining of a cross-encoder on the corpus.
//
// A cross-encoder trained from scratch on a hundred judged queries has to learn, from those
// alone, that a passage sharing the query's terms and topic is relevant. Cropping lists teach
// that first, from the corpus only: a span of a passage's words stands for a query (as in
// independent cropping, Izacard et al. 2022, "Unsupervised Dense Information Retrieval with
// Contrastive Learning", section 3.2, and the Inverse Cloze Task of Lee et al. 2019), the
// passage it was cut from is the list's positive, and its negatives are the passages a first
// stage ranks highest for that span, so that the cross-encoder must do better than share a
// few words with the span. The lists have the shape of ListBatch, so the listwise loss and the
// training graph of the supervised lists train on them unchanged.

// CropListOptions configure cropping lists.
type CropListOptions struct {
	Size      int // K, passages per list, >= 2
	BatchSize int // B, lists per batch, >= 1 and at most the passages with words
	MinLen    int // shortest pseudo-query, in words, >= 1 (pretrain.crop_min)
	MaxLen    int // longest pseudo-query, in words, >= MinLen (pretrain.crop_max)
	Depth     int // N, the first-stage hits of a pseudo-query that its negatives come from, >= 1
	// Window, when > 0, cuts spans from the first Window words of a passage only, the part a
	// cross-encoder of short length sees, so that the span is there to be found; 0 = anywhere.
	Window int
	Seed   uint64 // the recipe seed
}

// CropLists deals cropping lists deterministically from (seed, step): step s draws B distinct
// passages with words from PCG(seed ^ salt, s); from each, a span of n words, n uniform in
// [MinLen, MaxLen] (clipped to the passage's length), at a uniform start, re-joined with single
// spaces, is the list's query (with Window > 0, the span lies in the passage's first Window
// words); slot 0 is the whole passage (label 1); slots 1..K-1 are drawn
// uniformly without replacement from the search's top N for the query, the passage itself
// excluded, kept in rank order, and filled with random other passages when fewer than K-1 are
// left (ListBatch.RandomFills counts them). QueryIDs name the source passage as "crop:<doc id>".
type CropLists struct {
	c        Collection
	o        CropListOptions
	search   func(query string, n int) ([]string, error)
	docIndex map[string]int
	withText []int // corpus positions of the passages with words
}

// NewCropLists checks the options and the collection (DocTexts parallel to DocIDs, ids
// unique, at least B passages with words); search ranks the corpus for a query and returns the
// best n doc ids, best first (e.g. BM25). Queries and Qrels of c are not used.
func NewCropLists(c Collection, search func(query string, n int) ([]string, error), o CropListOptions) (*CropLists, error) {
	switch {
	case o.Size < 2:
		return nil, fmt.Errorf("sampler: crop list size %d, want >= 2 (a positive and a negative)", o.Size)
	case o.BatchSize < 1:
		return nil, fmt.Errorf("sampler: crop lists per batch %d, want >= 1", o.BatchSize)
	case o.MinLen < 1 || o.MaxLen < o.MinLen:
		return nil, fmt.Errorf("sampler: crop lengths [%d, %d], want 1 <= crop_min <= crop_max", o.MinLen, o.MaxLen)
	case o.Depth < 1:
		return nil, fmt.Errorf("sampler: crop negative depth %d, want >= 1", o.Depth)
	case o.Window < 0:
		return nil, fmt.Errorf("sampler: crop window %d, want >= 0 (0: the whole passage)", o.Window)
	case len(c.DocIDs) != len(c.DocTexts):
		return nil, fmt.Errorf("sampler: %d document ids but %d texts", len(c.DocIDs), len(c.DocTexts))
	case search == nil:
		return nil, fmt.Errorf("sampler: crop lists need a first stage to draw negatives from")
	}
	docIndex, err := indexDocs(c.DocIDs)
	if err != nil {
		return nil, err
	}
	l := &CropLists{c: c, o: o, search: search, docIndex: docIndex}
	for i := range c.DocIDs {
		if strings.TrimSpace(c.DocTexts[i]) != "" {
			l.withText = append(l.withText, i)
		}
	}
	if o.BatchSize > len(l.withText) || o.Size > len(c.DocIDs) {
		return nil, fmt.Errorf("sampler: crop lists of %d passages, %d per batch, need more than the %d passages with words",
			o.Size, o.BatchSize, len(l.withText))
	}
	return l, nil
}

// Batch returns the cropping lists of a step (0-based). It fails for a negative step and when
// the search fails or returns a doc id that is not in the corpus.
func (l *CropLists) Batch(step int) (ListBatch, error) {
	if step < 0 {
		return ListBatch{}, fmt.Errorf("sampler: step %d, want >= 0", step)
	}
	B, K := l.o.BatchSize, l.o.Size
	r := rand.New(rand.NewPCG(l.o.Seed^saltCropList, uint64(step)))
	b := ListBatch{Step: step, K: K,
		QueryIDs: make([]string, B), Queries: make([]string, B),
		DocIDs: make([]string, 0, B*K), Passages: make([]string, 0, B*K), Labels: make([]int, 0, B*K)}
	docs := slices.Clone(l.withText)
	for i := range B {
		j := i + r.IntN(len(docs)-i) // partial Fisher-Yates: B distinct passages
		docs[i], docs[j] = docs[j], docs[i]
		d := docs[i]
		id := l.c.DocIDs[d]
		words := strings.Fields(l.c.DocTexts[d])
		if w := l.o.Window; w > 0 && len(words) > w {
			words = words[:w]
		}
		q, _ := span(r, words, l.o.MinLen, l.o.MaxLen)
		b.QueryIDs[i], b.Queries[i] = "crop:"+id, q
		hits, err := l.search(q, l.o.Depth+1)
		if err != nil {
			return ListBatch{}, fmt.Errorf("sampler: step %d: crop list of passage %q: %w", step, id, err)
		}
		var negs []string
		for _, h := range hits {
			if _, ok := l.docIndex[h]; !ok {
				return ListBatch{}, fmt.Errorf("sampler: step %d: the first stage returned passage %q, which is not in the corpus", step, h)
			}
			if h != id && len(negs) < l.o.Depth && !slices.Contains(negs, h) {
				negs = append(negs, h)
			}
		}
		list := []string{id}
		idx := r.Perm(len(negs))[:min(K-1, len(negs))]
		slices.Sort(idx) // rank order
		for _, k := range idx {
			list = append(list, negs[k])
		}
		for len(list) < K { // NewCropLists checked K <= the corpus size
			if h := l.c.DocIDs[r.IntN(len(l.c.DocIDs))]; !slices.Contains(list, h) {
				list = append(list, h)
				b.RandomFills++
			}
		}
		b.appendList(list, l.c.DocTexts, l.docIndex, 1)
	}
	return b, nil
}

// saltCropList is the stream of cropping lists (see lists.go and mine.go for the others).
const saltCropList = 0x63726f702d6c7374 // "crop-lst"
