package model

import (
	"fmt"
	"hash"
	"hash/fnv"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// float is the element type of every differentiable tensor in this package.
type float interface{ ~float32 | ~float64 }

// kernel is what differs between the custom ops of this package. customOp
// wraps a kernel into a gorgonia.Op with symbolic (SymDiff) and automatic
// (DoDiff) differentiation.
type kernel interface {
	// name returns the op name with its parameters; kernels with equal names
	// compute the same function.
	name() string
	// typ is the op's type, fnType(input types..., output type); the op's arity is its number
	// of inputs.
	typ() hm.Type
	shape(in []tensor.Shape) (tensor.Shape, error)
	// forward writes every element of out (which may hold a previous result).
	forward(in []*tensor.Dense, out *tensor.Dense) error
	// diff says, per input, whether the op is differentiable with respect to it.
	diff() []bool
	// grads says, per input, how to compute the gradient of the loss with
	// respect to that input from the inputs, the output and the output's
	// gradient; nil for inputs that diff marks false.
	grads(in []tensor.Shape) []*gradTerm
}

// Arguments of a gradTerm besides input indices.
const (
	argOut   = -1 // the op's output
	argGrad  = -2 // the gradient of the loss with respect to the op's output
	argJoint = -3 // the output of the kernel's joint term (jointGrader)
)

// jointGrader is a kernel whose input gradients share one computation (the
// fused Attention: the gradients of q, k and v all need the recomputed
// attention weights). jointGrad returns that computation as a term, whose
// args may not include argJoint; the terms of grads read its output as
// argJoint, and it is computed once per run.
type jointGrader interface {
	jointGrad(in []tensor.Shape) *gradTerm
}

// gradTerm computes one input's gradient as k(args...). A nil k means the
// output gradient passes through unchanged, or with args {argJoint} the
// joint term's output.
type gradTerm struct {
	k    kernel
	args []int
}

func (t *gradTerm) passesJoint() bool {
	return t.k == nil && len(t.args) == 1 && t.args[0] == argJoint
}

var opSeq atomic.Uint64

// customOp adapts a kernel to gorgonia.Op, gorgonia.SDOp and gorgonia.ADOp.
// It keeps its output tensor between runs (a graph is built once and run many
// times), so a value read from its node is valid until the next run.
type customOp struct {
	k   kernel
	n   int    // the kernel's arity
	uid uint64 // nonzero for random ops, which Gorgonia must never merge
	out *tensor.Dense

	// Buffer sharing (ShareBuffers; ar nil without): out's backing buf is lent by ar while
	// the op's readers have still to run; uses is their number (0: the op keeps its buffer),
	// left those still to run in this run; release lists the producers of this op's inputs
	// that lend their buffers.
	ar         *arena
	buf        any
	uses, left int
	release    []*customOp

	// unneeded marks, while Grad differentiates the op's graph, the inputs whose gradient no
	// wanted gradient reads (nil otherwise): DiffWRT reports them not differentiable and SymDiff
	// builds no term for them.
	unneeded []bool
}

func newOp(k kernel) *customOp { return &customOp{k: k, n: arity(k)} }

// newRandomOp returns an op that is never merged with another op by
// Gorgonia's common-subexpression elimination.
func newRandomOp(k kernel) *customOp { return &customOp{k: k, n: arity(k), uid: opSeq.Add(1)} }

// arity counts the inputs of k's type a -> (b -> ... -> out).
func arity(k kernel) int {
	n := 0
	for t, ok := k.typ().(*hm.FunctionType); ok; t, ok = t.Ret(false).(*hm.FunctionType) {
		n++
	}
	return n
}

func (o *customOp) Arity() int        { return o.n }
func (o *customOp) Type() hm.Type     { return o.k.typ() }
func (o *customOp) ReturnsPtr() bool  { return false }
func (o *customOp) CallsExtern() bool { return false }
func (o *customOp) OverwritesInput() int {
	return -1
}
func (o *customOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "ragtrain.%s#%d", o.k.name(), o.uid) }
func (o *customOp) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}
func (o *customOp) String() string { return o.k.name() }

func (o *customOp) InferShape(ds ...gorgonia.DimSizer) (tensor.Shape, error) {
	if len(ds) != o.n {
		return nil, fmt.Errorf("model: %s: got %d inputs, want %d", o.k.name(), len(ds), o.n)
	}
	shapes := make([]tensor.Shape, len(ds))
	for i, d := range ds {
		s, ok := d.(tensor.Shape)
		if !ok {
			return nil, fmt.Errorf("model: %s: input %d has no shape (%T)", o.k.name(), i, d)
		}
		shapes[i] = s
	}
	return o.k.shape(shapes)
}

func (o *customOp) Do(vals ...gorgonia.Value) (gorgonia.Value, error) {
	in, shapes, err := denseInputs(o.k, o.n, vals)
	if err != nil {
		return nil, err
	}
	s, err := o.k.shape(shapes)
	if err != nil {
		return nil, err
	}
	dt := outDtype(in)
	switch {
	case o.ar != nil:
		o.acquire(dt, s)
	case o.out == nil || o.out.Dtype() != dt || !o.out.Shape().Eq(s):
		o.out = tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(dt))
	}
	if err := o.k.forward(in, o.out); err != nil {
		return nil, err
	}
	if o.ar != nil || len(o.release) > 0 {
		o.released()
	}
	return o.out, nil
}

// outDtype is the dtype of the first float input (ids are ints).
func outDtype(in []*tensor.Dense) tensor.Dtype {
	for _, t := range in {
		if dt := t.Dtype(); dt == tensor.Float32 || dt == tensor.Float64 {
			return dt
		}
	}
	return tensor.Float32
}

func denseInputs(k kernel, n int, vals []gorgonia.Value) ([]*tensor.Dense, []tensor.Shape, error) {
	if len(vals) != n {
		return nil, nil, fmt.Errorf("model: %s: got %d inputs, want %d", k.name(), len(vals), n)
	}
	in := make([]*tensor.Dense, len(vals))
	shapes := make([]tensor.Shape, len(vals))
	for i, v := range vals {
		d, ok := v.(*tensor.Dense)
		if !ok {
			return nil, nil, fmt.Errorf("model: %s: input %d is a %T, want *tensor.Dense", k.name(), i, v)
		}
		if d.RequiresIterator() {
			d = d.Materialize().(*tensor.Dense)
		}
		in[i] = d
		shapes[i] = d.Shape()
	}
	return in, shapes, nil
}

func (o *customOp) DiffWRT(n int) []bool {
	d := o.k.diff()
	if len(d) != n {
		return make([]bool, n)
	}
	if o.unneeded != nil {
		d = append([]bool(nil), d...)
		for i, u := range o.unneeded {
			d[i] = d[i] && !u
		}
	}
	return d
}

func (o *customOp) SymDiff(inputs gorgonia.Nodes, output, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	terms, err := o.gradTerms(inputs)
	if err != nil {
		return nil, err
	}
	var joint *gorgonia.Node
	jointNode := func() (*gorgonia.Node, error) {
		if joint != nil {
			return joint, nil
		}
		t, err := o.jointTerm(inputs)
		if err != nil {
			return nil, err
		}
		args, err := termArgs(t.args, inputs, output, grad, nil)
		if err != nil {
			return nil, err
		}
		if joint, err = gorgonia.ApplyOp(newOp(t.k), args...); err != nil {
			return nil, fmt.Errorf("model: joint gradient of %s: %w", o.k.name(), err)
		}
		return joint, nil
	}
	res := make(gorgonia.Nodes, len(inputs))
	for i, t := range terms {
		if t == nil || (o.unneeded != nil && o.unneeded[i]) {
			continue
		}
		if t.k == nil {
			res[i] = grad
			if t.passesJoint() {
				if res[i], err = jointNode(); err != nil {
					return nil, err
				}
			}
			continue
		}
		args, err := termArgs(t.args, inputs, output, grad, jointNode)
		if err != nil {
			return nil, err
		}
		if res[i], err = gorgonia.ApplyOp(newOp(t.k), args...); err != nil {
			return nil, fmt.Errorf("model: gradient of %s wrt input %d: %w", o.k.name(), i, err)
		}
	}
	return res, nil
}

// termArgs picks a gradTerm's arguments (nodes or values) from the op's
// inputs, output, output gradient and joint term (nil where there is none).
func termArgs[V any](args []int, in []V, out, grad V, joint func() (V, error)) ([]V, error) {
	vals := make([]V, len(args))
	for j, a := range args {
		switch a {
		case argOut:
			vals[j] = out
		case argGrad:
			vals[j] = grad
		case argJoint:
			if joint == nil {
				return nil, fmt.Errorf("model: a joint gradient term reads argJoint")
			}
			v, err := joint()
			if err != nil {
				return nil, err
			}
			vals[j] = v
		default:
			vals[j] = in[a]
		}
	}
	return vals, nil
}

func (o *customOp) gradTerms(inputs gorgonia.Nodes) ([]*gradTerm, error) {
	shapes, err := o.inputShapes(inputs)
	if err != nil {
		return nil, err
	}
	terms := o.k.grads(shapes)
	if terms == nil {
		return nil, fmt.Errorf("model: %s is not differentiable", o.k.name())
	}
	return terms, nil
}

func (o *customOp) jointTerm(inputs gorgonia.Nodes) (*gradTerm, error) {
	j, ok := o.k.(jointGrader)
	if !ok {
		return nil, fmt.Errorf("model: %s: a gradient reads argJoint but the kernel has no joint term", o.k.name())
	}
	shapes, err := o.inputShapes(inputs)
	if err != nil {
		return nil, err
	}
	return j.jointGrad(shapes), nil
}

func (o *customOp) inputShapes(inputs gorgonia.Nodes) ([]tensor.Shape, error) {
	if len(inputs) != o.n {
		return nil, fmt.Errorf("model: %s: got %d inputs, want %d", o.k.name(), len(inputs), o.n)
	}
	shapes := make([]tensor.Shape, len(inputs))
	for i, n := range inputs {
		shapes[i] = n.Shape()
	}
	return shapes, nil
}

// DoDiff accumulates the input gradients into the inputs' dual values, for
// Gorgonia's LispMachine.
func (o *customOp) DoDiff(ctx gorgonia.ExecutionContext, inputs gorgonia.Nodes, output *gorgonia.Node) error {
	terms, err := o.gradTerms(inputs)
	if err != nil {
		return err
	}
	g, err := output.Grad()
	if err != nil {
		return fmt.Errorf("model: %s: output gradient: %w", o.k.name(), err)
	}
	in := make([]gorgonia.Value, len(inputs))
	for i, n := range inputs {
		in[i] = n.Value()
	}
	var joint gorgonia.Value
	jointValue := func() (gorgonia.Value, error) {
		if joint != nil {
			return joint, nil
		}
		t, err := o.jointTerm(inputs)
		if err != nil {
			return nil, err
		}
		vals, err := termArgs(t.args, in, output.Value(), g, nil)
		if err != nil {
			return nil, err
		}
		joint, err = newOp(t.k).Do(vals...)
		return joint, err
	}
	for i, t := range terms {
		if t == nil {
			continue
		}
		dst, err := inputs[i].Grad()
		if err != nil {
			return fmt.Errorf("model: %s: gradient of input %d: %w", o.k.name(), i, err)
		}
		v := g
		if t.passesJoint() {
			if v, err = jointValue(); err != nil {
				return err
			}
		} else if t.k != nil {
			vals, err := termArgs(t.args, in, output.Value(), g, jointValue)
			if err != nil {
				return err
			}
			if v, err = newOp(t.k).Do(vals...); err != nil {
				return err
			}
		}
		if err := accumulate(dst, v); err != nil {
			return fmt.Errorf("model: %s: gradient of input %d: %w", o.k.name(), i, err)
		}
	}
	return nil
}

// accumulate adds src to dst element-wise.
func accumulate(dst, src gorgonia.Value) error {
	d, ok1 := dst.(*tensor.Dense)
	s, ok2 := src.(*tensor.Dense)
	if !ok1 || !ok2 || d.Size() != s.Size() {
		return fmt.Errorf("cannot add %v into %v", src.Shape(), dst.Shape())
	}
	switch dd := d.Data().(type) {
	case []float32:
		addInto(dd, s.Data().([]float32))
	case []float64:
		addInto(dd, s.Data().([]float64))
	default:
		return fmt.Errorf("unsupported dtype %v", d.Dtype())
	}
	return nil
}

func addInto[T float](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

// apply adds a kernel's op to the graph of its inputs.
func apply(k kernel, in ...*gorgonia.Node) (*gorgonia.Node, error) {
	n, err := gorgonia.ApplyOp(newOp(k), in...)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", k.name(), err)
	}
	return n, nil
}

// Type helpers: a is the float element type, b the (integer) id type.
var (
	tvA = hm.TypeVariable('a')
	tvB = hm.TypeVariable('i') // not 'b': Gorgonia's inferNodeType uses 'b' for the result
)

func ft(dims int) gorgonia.TensorType { return gorgonia.TensorType{Dims: dims, Of: tvA} }
func it(dims int) gorgonia.TensorType { return gorgonia.TensorType{Dims: dims, Of: tvB} }

func fnType(ts ...hm.Type) hm.Type { return hm.NewFnType(ts...) }

// Shape checks.

func want2D(op string, i int, s tensor.Shape) error {
	if len(s) != 2 {
		return fmt.Errorf("model: %s: input %d has shape %v, want a matrix", op, i, s)
	}
	return nil
}

func wantVec(op string, i int, s tensor.Shape, n int) error {
	if len(s) != 1 || (n >= 0 && s[0] != n) {
		if n < 0 {
			return fmt.Errorf("model: %s: input %d has shape %v, want a vector", op, i, s)
		}
		return fmt.Errorf("model: %s: input %d has shape %v, want (%d)", op, i, s, n)
	}
	return nil
}

// Tensor access.

func data[T float](t *tensor.Dense) []T { return t.Data().([]T) }

func ints(op string, t *tensor.Dense) ([]int, error) {
	v, ok := t.Data().([]int)
	if !ok {
		return nil, fmt.Errorf("model: %s: ids have dtype %v, want int", op, t.Dtype())
	}
	return v, nil
}

// parallelFor calls f on disjoint ranges covering [0, n), on up to
// GOMAXPROCS goroutines when n*cost (a rough count of operations) is large.
func parallelFor(n, cost int, f func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 || n*cost < 1<<15 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// noGrad is embedded by the kernels that compute a gradient: they are not differentiated
// again (DiffWRT is all false and they have no gradient terms).
type noGrad struct{}

func (noGrad) diff() []bool                     { return nil }
func (noGrad) grads([]tensor.Shape) []*gradTerm { return nil }

// sameShape returns a copy of the first of the inputs at (all inputs when at is empty) if the
// others have its shape; the error names them as what ("x and gradient").
func sameShape(op, what string, in []tensor.Shape, at ...int) (tensor.Shape, error) {
	s := in
	if len(at) > 0 {
		s = make([]tensor.Shape, len(at))
		for j, i := range at {
			s[j] = in[i]
		}
	}
	for _, t := range s[1:] {
		if !t.Eq(s[0]) {
			return nil, fmt.Errorf("model: %s: %s differ: %v", op, what, s)
		}
	}
	return s[0].Clone(), nil
}

// forward1 and forward2 are the forward pass of an element-wise kernel of one or two inputs:
// they run f32 or f64, whichever matches out's element type, on out and the inputs' data.
func forward1(out *tensor.Dense, in []*tensor.Dense, f32 func(o, x []float32), f64 func(o, x []float64)) error {
	switch o := out.Data().(type) {
	case []float32:
		f32(o, data[float32](in[0]))
	case []float64:
		f64(o, data[float64](in[0]))
	}
	return nil
}

func forward2(out *tensor.Dense, in []*tensor.Dense, f32 func(o, x, y []float32), f64 func(o, x, y []float64)) error {
	switch o := out.Data().(type) {
	case []float32:
		f32(o, data[float32](in[0]), data[float32](in[1]))
	case []float64:
		f64(o, data[float64](in[0]), data[float64](in[1]))
	}
	return nil
}

// copyFrom fills out with x's elements from element off on.
func copyFrom(out, x *tensor.Dense, off int) {
	switch o := out.Data().(type) {
	case []float32:
		copy(o, data[float32](x)[off:])
	case []float64:
		copy(o, data[float64](x)[off:])
	}
}
