package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LMBatch is a graph's LLaMA next-token log-probabilities over B rows of L tokens: B·(L-1)
// target slots, row r's token t predicting token t+1 in slot r·(L-1)+t, and the slots' keep
// mask, the two inputs of losses.TokenNLL. Let fills it from token sequences.
type LMBatch struct {
	B, L int
	// LogP [B·(L-1)] is each slot's log p(target), KeepN [B·(L-1)] the keep mask's node (1: the
	// slot counts, 0: padding or a token that is not a target); Keep holds its values.
	LogP, KeepN *gorgonia.Node
	Keep        []float32
	// Ckpt is the checkpointed training graph whose gradients Ckpt.Grad takes; nil: the plain
	// graph (Llama.BuildLogProbs).
	Ckpt *LlamaCheckpointed

	ids      []int
	mask     []float32
	pos, tgt []int
	in       *Inputs
	tg       *Targets
}

// NewLMBatch adds the batch's inputs and m's log-probabilities to g (nodes named name, name.targets,
// name.keep); with ckpt, as the checkpointed training graph (Llama.BuildLogProbsCheckpointed).
func NewLMBatch(g *gorgonia.ExprGraph, b *Binder, m *Llama, B, L int, name string, ckpt bool) (*LMBatch, error) {
	if B < 1 || L < 2 {
		return nil, fmt.Errorf("model: LM batch of %d rows of %d tokens, want >= 1 rows of >= 2", B, L)
	}
	M := B * (L - 1)
	keepT := tensor.New(tensor.WithShape(M), tensor.Of(tensor.Float32))
	lb := &LMBatch{B: B, L: L, ids: make([]int, B*L), mask: make([]float32, B*L), pos: make([]int, M), tgt: make([]int, M),
		Keep: keepT.Data().([]float32), in: NewInputs(g, B, L, name), tg: NewTargets(g, M, name+".targets")}
	var err error
	if ckpt {
		if lb.Ckpt, err = m.BuildLogProbsCheckpointed(b, lb.in, lb.tg); err != nil {
			return nil, err
		}
		lb.LogP = lb.Ckpt.LogProbs()
	} else if lb.LogP, err = m.BuildLogProbs(b, lb.in, lb.tg); err != nil {
		return nil, err
	}
	lb.KeepN = gorgonia.NewTensor(g, tensor.Float32, 1, gorgonia.WithShape(M), gorgonia.WithValue(keepT), gorgonia.WithName(name+".keep"))
	return lb, nil
}

// Let fills the batch from seqs (at most B of at most L tokens; rows past len(seqs) empty, their
// slots not kept). Slot r·(L-1)+t is kept when target(r, t+1) says token t+1 of seqs[r] is a
// target; nil target keeps every next token.
func (lb *LMBatch) Let(seqs [][]int, target func(r, t int) bool) error {
	clear(lb.ids)
	clear(lb.mask)
	clear(lb.Keep)
	for i := range lb.pos {
		lb.pos[i], lb.tgt[i] = -1, 0
	}
	if len(seqs) > lb.B {
		return fmt.Errorf("model: LM batch of %d texts, graph built for %d", len(seqs), lb.B)
	}
	for r, s := range seqs {
		if len(s) > lb.L {
			return fmt.Errorf("model: LM batch: text of %d tokens, graph built for %d", len(s), lb.L)
		}
		copy(lb.ids[r*lb.L:], s)
		for t := range s {
			lb.mask[r*lb.L+t] = 1
			if t+1 < len(s) {
				k := r*(lb.L-1) + t
				lb.pos[k], lb.tgt[k] = r*lb.L+t, s[t+1]
				if target == nil || target(r, t+1) {
					lb.Keep[k] = 1
				}
			}
		}
	}
	if err := lb.in.Let(lb.ids, lb.mask, nil); err != nil {
		return err
	}
	return lb.tg.Let(lb.pos, lb.tgt)
}
