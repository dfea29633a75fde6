package model

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ShareBuffers lets the custom ops of graph g lend their output buffers to one another, so that
// a run holds only the tensors still to be read: an op takes its output buffer from the graph's
// arena when it runs, and returns it once every op that reads it has run. The values are those
// of a graph without sharing, bit for bit (every op writes all of its output and none reads its
// output's previous contents); only memory changes. An inference graph then holds a few
// activations at a time instead of all of them, and a training graph frees each gradient once
// it has been consumed and each forward value after its last use in the backward pass.
//
// After a run, the value of a node is valid only if it keeps its own buffer: it is in keep, or
// nothing in g reads it (the loss, the gradients of the parameters), or one of the paths from
// it through ops other than this package's (Gorgonia's sums of gradient contributions,
// reshapes, a loss) ends in such a node or in a gorgonia.Read. Read every other node's value
// during the run, or name it in keep. Call ShareBuffers once the graph is complete (gradients
// included: gorgonia.Grad adds nodes), before the first run; calling it again changes nothing.
// Run the graph with a TapeMachine: a LispMachine reads forward values in its backward pass,
// after their buffers have gone back.
func ShareBuffers(g *gorgonia.ExprGraph, keep ...*gorgonia.Node) {
	ops := map[*gorgonia.Node]*customOp{}
	for _, n := range g.AllNodes() {
		if o, ok := n.Op().(*customOp); ok {
			if o.ar != nil {
				return // shared already
			}
			ops[n] = o
		}
	}
	kept := map[*gorgonia.Node]bool{}
	for _, n := range keep {
		kept[n] = true
	}
	ar := &arena{free: map[bufKey][]any{}}
	for _, n := range g.AllNodes() { // in the graph's order, so that buffers go back in the same order every time
		o, ok := ops[n]
		if !ok {
			continue
		}
		readers, ok := customReaders(g, n, ops, kept)
		if !ok || len(readers) == 0 {
			continue // the op keeps its buffer
		}
		o.ar, o.uses = ar, len(readers)
		for _, c := range readers {
			c.release = append(c.release, o)
		}
	}
}

// customReaders returns the custom ops that read n's value once it is computed: its consumers
// that are custom ops, and through consumers that are not (Gorgonia's own ops, such as the sums
// of gradient contributions that gorgonia.Grad adds), the custom ops that read their results, by
// which time those have read n (a Gorgonia op may also have written its result into n's buffer,
// which then dies with that result). It reports false if n's value may be read after the run: n
// is in keep, or a path of non-custom consumers from n ends in a node in keep or in one that
// nothing reads (a loss, a parameter's gradient, a gorgonia.Read).
func customReaders(g *gorgonia.ExprGraph, n *gorgonia.Node, ops map[*gorgonia.Node]*customOp, keep map[*gorgonia.Node]bool) ([]*customOp, bool) {
	if keep[n] {
		return nil, false
	}
	var readers []*customOp
	seen := map[*gorgonia.Node]bool{}
	var walk func(m *gorgonia.Node) bool
	walk = func(m *gorgonia.Node) bool {
		consumers := g.To(m.ID())
		if consumers.Len() == 0 {
			return false
		}
		for consumers.Next() {
			c := consumers.Node().(*gorgonia.Node)
			if seen[c] {
				continue
			}
			seen[c] = true
			if o, ok := ops[c]; ok {
				readers = append(readers, o)
				continue
			}
			if keep[c] || !walk(c) {
				return false
			}
		}
		return true
	}
	if !walk(n) {
		return nil, false
	}
	return readers, true
}

// bufKey identifies interchangeable buffers: the element type and the number of elements.
type bufKey struct {
	dt tensor.Dtype
	n  int
}

// arena holds the free output buffers of a graph's ops, []float32 or []float64, by bufKey. A
// graph runs one op at a time, so the arena needs no lock.
type arena struct {
	free  map[bufKey][]any
	bytes int // allocated, in all
}

func (a *arena) get(dt tensor.Dtype, n int) any {
	k := bufKey{dt, n}
	if l := a.free[k]; len(l) > 0 {
		b := l[len(l)-1]
		a.free[k] = l[:len(l)-1]
		return b
	}
	switch dt {
	case tensor.Float32:
		a.bytes += 4 * n
		return make([]float32, n)
	case tensor.Float64:
		a.bytes += 8 * n
		return make([]float64, n)
	}
	panic(fmt.Sprintf("model: arena: dtype %v", dt))
}

func (a *arena) put(dt tensor.Dtype, b any) {
	k := bufKey{dt, bufLen(b)}
	a.free[k] = append(a.free[k], b)
}

func bufLen(b any) int {
	switch v := b.(type) {
	case []float32:
		return len(v)
	case []float64:
		return len(v)
	}
	return 0
}

func sameBuf(a, b any) bool {
	switch x := a.(type) {
	case []float32:
		y, ok := b.([]float32)
		return ok && len(x) > 0 && len(y) > 0 && &x[0] == &y[0]
	case []float64:
		y, ok := b.([]float64)
		return ok && len(x) > 0 && len(y) > 0 && &x[0] == &y[0]
	}
	return false
}

// acquire points o.out at a buffer of the arena for an output of dtype dt and shape s, unless
// o still holds one from a run that did not finish.
func (o *customOp) acquire(dt tensor.Dtype, s tensor.Shape) {
	n := s.TotalSize()
	if o.buf == nil || o.out == nil || o.out.Dtype() != dt || bufLen(o.buf) != n {
		if o.buf != nil {
			o.ar.put(o.out.Dtype(), o.buf)
		}
		o.buf = o.ar.get(dt, n)
	}
	if o.out != nil && o.out.Dtype() == dt && o.out.Shape().Eq(s) && sameBuf(o.out.Data(), o.buf) {
		return
	}
	o.out = tensor.New(tensor.WithShape(s.Clone()...), tensor.WithBacking(o.buf))
}

// released is called after o's forward: o's buffer is lent until its readers have run, and the
// producers of o's inputs that have no reader left get their buffers back.
func (o *customOp) released() {
	o.left = o.uses
	for _, p := range o.release {
		p.left--
		if p.left == 0 && p.buf != nil {
			p.ar.put(p.out.Dtype(), p.buf)
			p.buf = nil
		}
	}
}
