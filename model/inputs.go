package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Inputs are the input nodes of one batch of token sequences in a graph:
// B sequences of L tokens, row-major (sequence b is positions b*L..b*L+L-1).
//
//	IDs   int tensor (B*L)    token ids, each in [0,V)
//	Mask  float   [B,L]       1 for real tokens, 0 for padding
//	Types int tensor (B*L)    segment ids, each in [0,TypeVocab)
//
// The ids enter as int tensors, so no gradient is ever asked for them. Each
// node is bound once to a tensor owned by Inputs; Let copies a batch into
// those tensors, so running the graph again sees the new batch.
type Inputs struct {
	IDs, Mask, Types *gorgonia.Node
	B, L             int

	ids, types []int
	mask       *tensor.Dense
}

// NewInputs adds the input nodes of a B x L batch to g, named name+".ids",
// name+".mask" and name+".types", with a float32 mask. It panics if g
// already has nodes of that name (Gorgonia would silently merge them).
func NewInputs(g *gorgonia.ExprGraph, B, L int, name string) *Inputs {
	return newInputs(g, B, L, name, tensor.Float32)
}

// NewInputsOf is NewInputs with a mask of dtype dt, that of the tower it feeds (Tower.Dtype).
func NewInputsOf(g *gorgonia.ExprGraph, B, L int, name string, dt tensor.Dtype) *Inputs {
	return newInputs(g, B, L, name, dt)
}

// newInputs is NewInputs with the mask dtype of the model (float64 in tests).
func newInputs(g *gorgonia.ExprGraph, B, L int, name string, dt tensor.Dtype) *Inputs {
	if B <= 0 || L <= 0 {
		panic(fmt.Sprintf("model: NewInputs %q: batch %d x %d", name, B, L))
	}
	for _, suffix := range []string{".ids", ".mask", ".types"} {
		if len(g.ByName(name+suffix)) > 0 {
			panic(fmt.Sprintf("model: NewInputs: graph already has a node named %q", name+suffix))
		}
	}
	in := &Inputs{
		B: B, L: L,
		ids:   make([]int, B*L),
		types: make([]int, B*L),
		mask:  tensor.New(tensor.WithShape(B, L), tensor.Of(dt)),
	}
	idT := tensor.New(tensor.WithShape(B*L), tensor.WithBacking(in.ids))
	typeT := tensor.New(tensor.WithShape(B*L), tensor.WithBacking(in.types))
	in.IDs = gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(B*L), gorgonia.WithValue(idT), gorgonia.WithName(name+".ids"))
	in.Types = gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(B*L), gorgonia.WithValue(typeT), gorgonia.WithName(name+".types"))
	in.Mask = gorgonia.NewTensor(g, dt, 2, gorgonia.WithShape(B, L), gorgonia.WithValue(in.mask), gorgonia.WithName(name+".mask"))
	return in
}

// Let copies one batch into the input tensors. ids and mask must hold B*L
// values (row-major); types must hold B*L values or be nil (all segment 0).
// Mask values must be 0 or 1. Ids are checked against the vocabulary when
// the graph runs.
func (in *Inputs) Let(ids []int, mask []float32, types []int) error {
	n := in.B * in.L
	if len(ids) != n {
		return fmt.Errorf("model: inputs %s: %d ids, want B*L = %d*%d = %d", in.IDs.Name(), len(ids), in.B, in.L, n)
	}
	if len(mask) != n {
		return fmt.Errorf("model: inputs %s: %d mask values, want B*L = %d", in.Mask.Name(), len(mask), n)
	}
	if types != nil && len(types) != n {
		return fmt.Errorf("model: inputs %s: %d types, want B*L = %d", in.Types.Name(), len(types), n)
	}
	for i, m := range mask {
		if m != 0 && m != 1 {
			return fmt.Errorf("model: inputs %s: mask[%d] = %g, want 0 or 1", in.Mask.Name(), i, m)
		}
	}
	copy(in.ids, ids)
	if types == nil {
		clear(in.types)
	} else {
		copy(in.types, types)
	}
	switch d := in.mask.Data().(type) {
	case []float32:
		copy(d, mask)
	case []float64:
		for i, m := range mask {
			d[i] = float64(m)
		}
	}
	return nil
}
