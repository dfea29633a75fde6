package sampler

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// CropBatch is a batch of unsupervised positive pairs made by independent cropping.
type CropBatch struct {
	Step      int
	DocIndex  []int    // B distinct positions in the corpus texts
	Queries   []string // B first spans ("queries")
	Positives []string // B second spans ("positives")
	// Clipped counts spans whose drawn length exceeded their document's word count and were
	// cut to the whole document (out of 2·B spans).
	Clipped int
}

// CropPairs makes B positive pairs for unsupervised contrastive pre-training by independent
// cropping (Izacard et al. 2022, "Unsupervised Dense Information Retrieval with Contrastive
// Learning", section 3.2): B distinct documents are drawn, and from each two spans of words are
// cut independently, each of a length drawn uniformly from [minLen, maxLen] words (clipped to the
// document's length) at a uniform start; the two spans of a document form a (query, positive)
// pair and the other B-1 positives serve as its in-batch negatives. Words are whitespace-separated
// tokens (strings.Fields) and spans are re-joined with single spaces. Documents without words are
// never drawn.
//
// The batch depends on (corpusTexts, B, minLen, maxLen, step, seed) only. Errors: B < 1,
// minLen < 1, maxLen < minLen, and fewer than B documents with words.
func CropPairs(corpusTexts []string, B, minLen, maxLen, step int, seed uint64) (CropBatch, error) {
	return CropPairsFunc(len(corpusTexts), func(i int) string { return corpusTexts[i] }, B, minLen, maxLen, step, seed)
}

// CropPairsFunc is CropPairs over a corpus of n texts read through text(i) (a corpus kept on
// disk): the same batch as CropPairs of those texts.
func CropPairsFunc(n int, text func(i int) string, B, minLen, maxLen, step int, seed uint64) (CropBatch, error) {
	switch {
	case B < 1:
		return CropBatch{}, fmt.Errorf("sampler: crop batch size %d, want >= 1", B)
	case minLen < 1 || maxLen < minLen:
		return CropBatch{}, fmt.Errorf("sampler: crop lengths [%d, %d], want 1 <= crop_min <= crop_max", minLen, maxLen)
	case step < 0:
		return CropBatch{}, fmt.Errorf("sampler: step %d, want >= 0", step)
	}
	r := rand.New(rand.NewPCG(seed^saltCrop, uint64(step)))
	out := CropBatch{Step: step, DocIndex: make([]int, 0, B), Queries: make([]string, 0, B), Positives: make([]string, 0, B)}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	// partial Fisher-Yates: draw documents without replacement until B have words
	for i := 0; i < len(idx) && len(out.DocIndex) < B; i++ {
		j := i + r.IntN(len(idx)-i)
		idx[i], idx[j] = idx[j], idx[i]
		words := strings.Fields(text(idx[i]))
		if len(words) == 0 {
			continue
		}
		q, cq := span(r, words, minLen, maxLen)
		p, cp := span(r, words, minLen, maxLen)
		out.DocIndex = append(out.DocIndex, idx[i])
		out.Queries = append(out.Queries, q)
		out.Positives = append(out.Positives, p)
		out.Clipped += cq + cp
	}
	if len(out.DocIndex) < B {
		return CropBatch{}, fmt.Errorf("sampler: crop batch size %d exceeds the %d documents with words", B, len(out.DocIndex))
	}
	return out, nil
}

// span cuts a random span of words; the int is 1 when its length was clipped to the document.
func span(r *rand.Rand, words []string, minLen, maxLen int) (string, int) {
	n, clipped := minLen+r.IntN(maxLen-minLen+1), 0
	if n > len(words) {
		n, clipped = len(words), 1
	}
	start := r.IntN(len(words) - n + 1)
	return strings.Join(words[start:start+n], " "), clipped
}
