package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
)

// BuildStatesKeys adds the reader to the binder's graph for inference (no dropout) and returns
// its final token states [B*L,H] (ln_f's output, which the tied embeddings score: logits =
// states · Eᵀ) and the kNN-LM keys [B*L,H]: the input of the last layer's feed-forward block,
// LayerNorm₂ of the last block's attention output a (Khandelwal et al. 2020, "Generalization
// through Memorization: Nearest Neighbor Language Models", section 3: "the input to the final
// layer's feedforward network ... after layer normalization"). Row b*L+t is token t of sequence
// b; both are causal, so row t depends on tokens <= t only.
func (r *Reader) BuildStatesKeys(b *Binder, in *Inputs) (states, keys *gorgonia.Node, err error) {
	var ffn []*gorgonia.Node
	r.Tower.ffnIn = &ffn
	defer func() { r.Tower.ffnIn = nil }()
	if states, err = r.Tower.BuildTokens(b, in, false); err != nil {
		return nil, nil, err
	}
	if len(ffn) != r.Cfg.Layers {
		return nil, nil, fmt.Errorf("model: reader keys: %d feed-forward inputs collected, want %d layers", len(ffn), r.Cfg.Layers)
	}
	return states, ffn[len(ffn)-1], nil
}

// KeyRunner runs a reader for kNN-LM: per batch of B sequences of at most L tokens, the final
// token states and the keys of BuildStatesKeys, as float32 rows. It reads the reader's current
// parameters at every run. Not safe for concurrent use.
type KeyRunner struct {
	r            *Reader
	B, L         int
	in           *Inputs
	states, keys *gorgonia.Node
	vm           gorgonia.VM
	ids          []int
	mask         []float32
}

// NewKeyRunner builds the inference graph of BuildStatesKeys for batches of B x L.
func NewKeyRunner(r *Reader, B, L int) (*KeyRunner, error) {
	if B <= 0 || L <= 0 || L > r.Cfg.MaxPosition {
		return nil, fmt.Errorf("model: key runner: batch %d x %d (max_position %d)", B, L, r.Cfg.MaxPosition)
	}
	g := gorgonia.NewGraph()
	in := newInputs(g, B, L, "reader.keys", r.Tower.dt)
	states, keys, err := r.BuildStatesKeys(NewBinder(g), in)
	if err != nil {
		return nil, err
	}
	ShareBuffers(g, states, keys)
	return &KeyRunner{r: r, B: B, L: L, in: in, states: states, keys: keys, vm: gorgonia.NewTapeMachine(g),
		ids: make([]int, B*L), mask: make([]float32, B*L)}, nil
}

// Close releases the runner's machine.
func (kr *KeyRunner) Close() error { return kr.vm.Close() }

// Run runs at most B sequences (each 1..L token ids) and returns the states and the keys, each
// [B*L,H] row-major float32 (row b*L+t: token t of sequence b; rows past a sequence's end are
// padding and meaningless). The slices are the runner's and change at the next Run.
func (kr *KeyRunner) Run(seqs [][]int) (states, keys []float32, err error) {
	if len(seqs) == 0 || len(seqs) > kr.B {
		return nil, nil, fmt.Errorf("model: key runner: %d sequences, want 1..%d", len(seqs), kr.B)
	}
	clear(kr.ids)
	clear(kr.mask)
	for b, s := range seqs {
		if len(s) == 0 || len(s) > kr.L {
			return nil, nil, fmt.Errorf("model: key runner: sequence %d has %d tokens, want 1..%d", b, len(s), kr.L)
		}
		copy(kr.ids[b*kr.L:], s)
		for t := range s {
			kr.mask[b*kr.L+t] = 1
		}
	}
	if err := kr.in.Let(kr.ids, kr.mask, nil); err != nil {
		return nil, nil, err
	}
	kr.vm.Reset()
	if err := kr.vm.RunAll(); err != nil {
		return nil, nil, err
	}
	st, ok1 := kr.states.Value().Data().([]float32)
	ks, ok2 := kr.keys.Value().Data().([]float32)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("model: key runner: the reader is not float32")
	}
	return st, ks, nil
}

// Embeddings is the tied word embedding matrix E [V,H] (row-major float32, the reader's own
// storage: do not write): logits = state · Eᵀ.
func (r *Reader) Embeddings() []float32 {
	return r.Tower.byName["embeddings.word"].Value.Data().([]float32)
}

// Hidden is H, the values of a state or key row.
func (kr *KeyRunner) Hidden() int { return kr.r.Cfg.Hidden }
