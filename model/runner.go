package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
)

// EncoderRunner encodes many sequences with one tower for inference (e.g. a
// corpus): it builds a B x L inference graph once (no dropout) and runs it
// per batch of B sequences. It reads the tower's current parameter values at
// every run. Not safe for concurrent use.
type EncoderRunner struct {
	tower *Tower
	b, l  int
	in    *Inputs
	out   *gorgonia.Node
	vm    gorgonia.VM

	ids, types []int
	mask       []float32
}

// NewEncoderRunner builds the inference graph of t for batches of B
// sequences of length L.
func NewEncoderRunner(t *Tower, B, L int) (*EncoderRunner, error) {
	if B <= 0 || L <= 0 {
		return nil, fmt.Errorf("model: encoder runner: batch %d x %d", B, L)
	}
	g := gorgonia.NewGraph()
	in := newInputs(g, B, L, t.Prefix+".encode", t.dt)
	out, err := t.Build(NewBinder(g), in, false)
	if err != nil {
		return nil, err
	}
	return &EncoderRunner{
		tower: t, b: B, l: L, in: in, out: out,
		vm:  gorgonia.NewTapeMachine(g),
		ids: make([]int, B*L), types: make([]int, B*L), mask: make([]float32, B*L),
	}, nil
}

// Encode encodes n sequences of length L given row-major: ids and mask hold
// n*L values, types n*L values or nil (all 0). It returns n*H float32 values,
// row i the vector of sequence i. The last partial batch is padded with
// empty sequences, whose vectors are discarded.
func (r *EncoderRunner) Encode(ids []int, mask []float32, types []int, n int) ([]float32, error) {
	l := r.l
	if n < 0 || len(ids) != n*l || len(mask) != n*l || (types != nil && len(types) != n*l) {
		return nil, fmt.Errorf("model: encode: %d sequences of length %d need %d ids, mask values and types; got %d, %d, %d",
			n, l, n*l, len(ids), len(mask), len(types))
	}
	h := r.tower.Dim()
	res := make([]float32, n*h)
	for start := 0; start < n; start += r.b {
		rows := min(r.b, n-start)
		lo, hi := start*l, (start+rows)*l
		clear(r.ids)
		clear(r.mask)
		clear(r.types)
		copy(r.ids, ids[lo:hi])
		copy(r.mask, mask[lo:hi])
		if types != nil {
			copy(r.types, types[lo:hi])
		}
		if err := r.in.Let(r.ids, r.mask, r.types); err != nil {
			return nil, fmt.Errorf("model: encode sequences %d..%d: %w", start, start+rows-1, err)
		}
		r.vm.Reset()
		if err := r.vm.RunAll(); err != nil {
			return nil, fmt.Errorf("model: encode sequences %d..%d: %w", start, start+rows-1, err)
		}
		dst := res[start*h : (start+rows)*h]
		switch v := r.out.Value().Data().(type) {
		case []float32:
			copy(dst, v)
		case []float64:
			for i := range dst {
				dst[i] = float32(v[i])
			}
		}
	}
	return res, nil
}

// Close releases the runner's machine.
func (r *EncoderRunner) Close() error { return r.vm.Close() }
