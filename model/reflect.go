package model

import (
	"fmt"
	"math"
)

// NextTokenRunner gives the reader's next-token log-probabilities after many prompts: the
// distribution a reflection token is read from (Self-RAG, Asai et al. 2024, scores passages by
// P([Relevant]) and answers by the support tokens' probabilities at one position). Like
// ReaderRunner it runs one B x L inference graph without dropout, reading the reader's current
// parameters at every run. Not safe for concurrent use.
type NextTokenRunner struct{ tokenRunner }

// NewNextTokenRunner builds the inference graph for batches of B prompts of at most L tokens.
func NewNextTokenRunner(r *Reader, B, L int) (*NextTokenRunner, error) {
	t, err := newTokenRunner(r, B, L, "next-token runner", "reader.next")
	if err != nil {
		return nil, err
	}
	return &NextTokenRunner{t}, nil
}

// Close releases the runner's machine.
func (n *NextTokenRunner) Close() error { return n.vm.Close() }

// LogProbs returns, for every prompt (token ids, 1..L of them), log p(id | prompt) for each of
// ids, normalised over the whole vocabulary: out[i][j] = log softmax(h_i · Eᵀ)[ids[j]], h_i the
// token state at the prompt's last position. Errors: an id outside [0, V), a prompt of the
// wrong length.
func (n *NextTokenRunner) LogProbs(prompts [][]int, ids []int) ([][]float64, error) {
	v, h, L := n.r.Cfg.Vocab, n.r.Cfg.Hidden, n.l
	for _, id := range ids {
		if id < 0 || id >= v {
			return nil, fmt.Errorf("model: next-token log-probs: id %d is out of range [0,%d)", id, v)
		}
	}
	for i, p := range prompts {
		if len(p) == 0 || len(p) > L {
			return nil, fmt.Errorf("model: next-token log-probs: prompt %d has %d tokens, want 1..%d", i, len(p), L)
		}
	}
	emb := n.r.Param(PrefixReader + ".embeddings.word").Value
	out := make([][]float64, len(prompts))
	tokIDs := make([]int, n.b*L)
	mask := make([]float32, n.b*L)
	sel := make([]float64, h)
	logits := make([]float64, v)
	for start := 0; start < len(prompts); start += n.b {
		end := min(start+n.b, len(prompts))
		clear(tokIDs)
		clear(mask)
		for i, p := range prompts[start:end] {
			copy(tokIDs[i*L:], p)
			for t := range p {
				mask[i*L+t] = 1
			}
		}
		if err := n.in.Let(tokIDs, mask, nil); err != nil {
			return nil, err
		}
		n.vm.Reset()
		if err := n.vm.RunAll(); err != nil {
			return nil, fmt.Errorf("model: next-token log-probs: prompts %d..%d: %w", start, end-1, err)
		}
		for i, p := range prompts[start:end] {
			row := (i*L + len(p) - 1) * h
			rowLogits(logits, sel, n.out.Value(), row, emb)
			lse := logSumExp(logits)
			lp := make([]float64, len(ids))
			for j, id := range ids {
				lp[j] = logits[id] - lse
			}
			out[start+i] = lp
		}
	}
	return out, nil
}

// logSumExp returns log Σ exp(z).
func logSumExp(z []float64) float64 {
	m := math.Inf(-1)
	for _, x := range z {
		m = max(m, x)
	}
	var s float64
	for _, x := range z {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}
