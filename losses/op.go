package losses

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"github.com/pkg/errors"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// arr is a dense row-major float64 array: the form every custom kernel of this package works on.
// Float32 values are widened on the way in and narrowed on the way out, so a kernel is written
// once and float32 graphs get float64 accuracy inside the op.
type arr struct {
	data  []float64
	shape tensor.Shape
}

// fop is a Gorgonia Op whose forward pass is a Go function over float64 arrays.
//
// Ops built from it implement gorgonia.SDOp (symbolic differentiation, used by gorgonia.Grad
// and a TapeMachine); they do not implement ADOp, so a LispMachine cannot differentiate them.
// An op with grad == nil has no derivative: its DiffWRT is all false, and it is used for values
// that the loss treats as constants (labels, masks, teacher distributions) and for the gradient
// kernels themselves (no second derivatives).
type fop struct {
	name    string                                        // names the op and its parameters; it is also the op's hash
	inDims  []int                                         // rank of each input (the op's arity is len(inDims))
	outDims int                                           // rank of the output
	shape   func(in []tensor.Shape) (tensor.Shape, error) // nil: every input has input 0's shape, as the output
	fwd     func(in []arr) ([]float64, error)
	diff    []bool // which inputs the op is differentiable with respect to
	grad    func(in G.Nodes, out, g *G.Node) (G.Nodes, error)
}

func (o *fop) Arity() int { return len(o.inDims) }

func (o *fop) Type() hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, 0, len(o.inDims)+1)
	for _, d := range o.inDims {
		ts = append(ts, rankType(d, a))
	}
	ts = append(ts, rankType(o.outDims, a))
	return hm.NewFnType(ts...)
}

func rankType(dims int, a hm.Type) hm.Type {
	if dims == 0 {
		return a
	}
	return G.TensorType{Dims: dims, Of: a}
}

func (o *fop) InferShape(ds ...G.DimSizer) (tensor.Shape, error) {
	if len(ds) != len(o.inDims) {
		return nil, errors.Errorf("%s: got %d inputs, want %d", o.name, len(ds), len(o.inDims))
	}
	in := make([]tensor.Shape, len(ds))
	for i, d := range ds {
		s, ok := d.(tensor.Shape)
		if !ok {
			return nil, errors.Errorf("%s: input %d has no static shape (%T)", o.name, i, d)
		}
		if len(s) != o.inDims[i] {
			return nil, errors.Errorf("%s: input %d has shape %v, want rank %d", o.name, i, s, o.inDims[i])
		}
		in[i] = s.Clone()
	}
	return o.outShape(in)
}

func (o *fop) Do(vs ...G.Value) (G.Value, error) {
	if len(vs) != len(o.inDims) {
		return nil, errors.Errorf("%s: got %d values, want %d", o.name, len(vs), len(o.inDims))
	}
	in := make([]arr, len(vs))
	shapes := make([]tensor.Shape, len(vs))
	var dt tensor.Dtype
	for i, v := range vs {
		a, d, err := toArr(v)
		if err != nil {
			return nil, errors.Wrapf(err, "%s: input %d", o.name, i)
		}
		if i == 0 {
			dt = d
		} else if d != dt {
			return nil, errors.Errorf("%s: input %d is %v, input 0 is %v", o.name, i, d, dt)
		}
		in[i], shapes[i] = a, a.shape
	}
	outShape, err := o.outShape(shapes)
	if err != nil {
		return nil, err
	}
	out, err := o.fwd(in)
	if err != nil {
		return nil, err
	}
	if len(out) != outShape.TotalSize() {
		return nil, errors.Errorf("%s: kernel returned %d values for shape %v", o.name, len(out), outShape)
	}
	return fromFloat64(out, outShape, dt), nil
}

// outShape applies the op's shape rule, sameShape where it has none.
func (o *fop) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if o.shape == nil {
		return sameShape(o.name)(in)
	}
	return o.shape(in)
}

func (o *fop) ReturnsPtr() bool      { return false }
func (o *fop) CallsExtern() bool     { return false }
func (o *fop) OverwritesInput() int  { return -1 }
func (o *fop) WriteHash(h hash.Hash) { fmt.Fprintf(h, "losses.%s", o.name) }
func (o *fop) String() string        { return o.name }

func (o *fop) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

func (o *fop) DiffWRT(n int) []bool {
	d := make([]bool, n)
	if o.grad != nil {
		copy(d, o.diff)
	}
	return d
}

func (o *fop) SymDiff(in G.Nodes, out, g *G.Node) (G.Nodes, error) {
	if o.grad == nil {
		return nil, errors.Errorf("%s has no derivative", o.name)
	}
	return o.grad(in, out, g)
}

// apply builds a node applying o to the children.
func (o *fop) apply(children ...*G.Node) (*G.Node, error) {
	n, err := G.ApplyOp(o, children...)
	if err != nil {
		return nil, errors.Wrapf(err, "losses: %s", o.name)
	}
	return n, nil
}

// toArr reads a float32 or float64 tensor value as float64.
func toArr(v G.Value) (arr, tensor.Dtype, error) {
	t, ok := v.(tensor.Tensor)
	if !ok {
		return arr{}, tensor.Dtype{}, errors.Errorf("want a tensor, got %T", v)
	}
	if d, ok := t.(*tensor.Dense); ok && d.RequiresIterator() {
		t = d.Materialize()
	}
	shape := t.Shape().Clone()
	switch data := t.Data().(type) {
	case []float64:
		out := make([]float64, len(data))
		copy(out, data)
		return arr{out, shape}, tensor.Float64, nil
	case []float32:
		out := make([]float64, len(data))
		for i, x := range data {
			out[i] = float64(x)
		}
		return arr{out, shape}, tensor.Float32, nil
	default:
		return arr{}, tensor.Dtype{}, errors.Errorf("want float32 or float64 data, got %T", t.Data())
	}
}

func fromFloat64(data []float64, shape tensor.Shape, dt tensor.Dtype) *tensor.Dense {
	if dt == tensor.Float32 {
		f := make([]float32, len(data))
		for i, x := range data {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// sameShape is the shape rule of an elementwise op: every input has the shape of input 0.
func sameShape(name string) func([]tensor.Shape) (tensor.Shape, error) {
	return func(in []tensor.Shape) (tensor.Shape, error) {
		for i := 1; i < len(in); i++ {
			if !in[i].Eq(in[0]) {
				return nil, errors.Errorf("%s: input %d has shape %v, input 0 has %v", name, i, in[i], in[0])
			}
		}
		return in[0].Clone(), nil
	}
}

// rowsShape is the shape rule of a row reduction: input 0 is [R,C], the other inputs (if any)
// are [R], the output is [R].
func rowsShape(name string) func([]tensor.Shape) (tensor.Shape, error) {
	return func(in []tensor.Shape) (tensor.Shape, error) {
		r := in[0][0]
		for i := 1; i < len(in); i++ {
			if !in[i].Eq(tensor.Shape{r}) {
				return nil, errors.Errorf("%s: input %d has shape %v, want (%d)", name, i, in[i], r)
			}
		}
		return tensor.Shape{r}, nil
	}
}
