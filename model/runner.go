package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// batchRunner runs a graph built once for B x L inputs over any number of sequences, B at a
// time, padding the last partial batch with empty sequences whose outputs are discarded. The
// graph's output holds width values per sequence. Not safe for concurrent use.
type batchRunner struct {
	b, l, width int
	in          *Inputs
	out         *gorgonia.Node
	vm          gorgonia.VM

	ids, types []int
	mask       []float32
}

func newBatchRunner(B, L, width int, name string, dt tensor.Dtype, build func(*Binder, *Inputs) (*gorgonia.Node, error)) (*batchRunner, error) {
	if B <= 0 || L <= 0 {
		return nil, fmt.Errorf("model: %s runner: batch %d x %d", name, B, L)
	}
	g := gorgonia.NewGraph()
	in := newInputs(g, B, L, name, dt)
	out, err := build(NewBinder(g), in)
	if err != nil {
		return nil, err
	}
	ShareBuffers(g, out) // the activations of an inference graph die as they are consumed
	return &batchRunner{
		b: B, l: L, width: width, in: in, out: out,
		vm:  gorgonia.NewTapeMachine(g),
		ids: make([]int, B*L), types: make([]int, B*L), mask: make([]float32, B*L),
	}, nil
}

// run feeds n row-major sequences (types may be nil: all 0) and returns n*width values.
// what names the sequences in errors ("encode sequences", "score pairs").
func (r *batchRunner) run(ids []int, mask []float32, types []int, n int, what string) ([]float32, error) {
	l, w := r.l, r.width
	res := make([]float32, n*w)
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
			return nil, fmt.Errorf("model: %s %d..%d: %w", what, start, start+rows-1, err)
		}
		r.vm.Reset()
		if err := r.vm.RunAll(); err != nil {
			return nil, fmt.Errorf("model: %s %d..%d: %w", what, start, start+rows-1, err)
		}
		dst := res[start*w : (start+rows)*w]
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
func (r *batchRunner) Close() error { return r.vm.Close() }

// EncoderRunner encodes many sequences with one tower for inference (e.g. a
// corpus): it builds a B x L inference graph once (no dropout) and runs it
// per batch of B sequences. It reads the tower's current parameter values at
// every run. Not safe for concurrent use.
type EncoderRunner struct {
	*batchRunner
}

// NewEncoderRunner builds the inference graph of t for batches of B
// sequences of length L.
func NewEncoderRunner(t *Tower, B, L int) (*EncoderRunner, error) {
	r, err := newBatchRunner(B, L, t.Dim(), t.Prefix+".encode", t.dt, func(b *Binder, in *Inputs) (*gorgonia.Node, error) {
		return t.Build(b, in, false)
	})
	if err != nil {
		return nil, err
	}
	return &EncoderRunner{r}, nil
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
	return r.run(ids, mask, types, n, "encode sequences")
}
