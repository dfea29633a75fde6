package model

import (
	"fmt"
	"slices"
)

// GrowVocab returns a copy of the trained reader r with a vocabulary of v >= r.Vocab() ids, for
// tokens added to its tokenizer after training (AddSpecialTokens gives them the ids
// r.Vocab()..v-1; Self-RAG's reflection tokens, Asai et al. 2024). Every parameter is copied;
// the word embedding E [V,H], which is also the output matrix (tied embeddings), gets v-V new
// rows, each the mean of the V existing rows (Hewitt 2021, "Initializing new word embeddings
// for pretrained language models": the new tokens start with the average logit and do not take
// over the distribution). Old ids keep their rows, so the token states and the logits of old
// tokens are unchanged; only the softmax normaliser grows by the new tokens' terms, shifting
// every old log-probability at a position by the same amount.
//
// r itself is not changed. Dropout masks of the copy come from a PCG seeded with seed until
// SetRNG replaces it. Errors: v < r.Vocab().
func GrowVocab(r *Reader, v int, seed uint64) (*Reader, error) {
	old := r.Cfg.Vocab
	if v < old {
		return nil, fmt.Errorf("model: grow reader vocabulary: %d ids is below the reader's %d", v, old)
	}
	cfg := r.Cfg
	cfg.Vocab = v
	g, err := newReader(cfg, seed, r.Tower.dt)
	if err != nil {
		return nil, err
	}
	word := PrefixReader + ".embeddings.word"
	for _, p := range g.Params() {
		src := r.Param(p.Name)
		if src == nil {
			return nil, fmt.Errorf("model: grow reader vocabulary: the reader has no parameter %q", p.Name)
		}
		if p.Name != word {
			if !slices.Equal(src.Value.Shape(), p.Value.Shape()) {
				return nil, fmt.Errorf("model: grow reader vocabulary: %s has shape %v, want %v", p.Name, src.Value.Shape(), p.Value.Shape())
			}
			copyValues(p, src, 0)
			continue
		}
		h := cfg.Hidden
		copyValues(p, src, old*h)
		meanRows(p, old, v, h)
	}
	return g, nil
}

// copyValues copies src's values into dst (n values; 0: all).
func copyValues(dst, src *Param, n int) {
	switch d := dst.Value.Data().(type) {
	case []float32:
		s := src.Value.Data().([]float32)
		if n == 0 {
			n = len(s)
		}
		copy(d, s[:n])
	case []float64:
		s := src.Value.Data().([]float64)
		if n == 0 {
			n = len(s)
		}
		copy(d, s[:n])
	}
}

// meanRows sets rows old..v-1 of the [v,h] matrix p to the mean of rows 0..old-1.
func meanRows(p *Param, old, v, h int) {
	mean := make([]float64, h)
	switch d := p.Value.Data().(type) {
	case []float32:
		for i := range old * h {
			mean[i%h] += float64(d[i])
		}
		for i := old * h; i < v*h; i++ {
			d[i] = float32(mean[i%h] / float64(old))
		}
	case []float64:
		for i := range old * h {
			mean[i%h] += d[i]
		}
		for i := old * h; i < v*h; i++ {
			d[i] = mean[i%h] / float64(old)
		}
	}
}
