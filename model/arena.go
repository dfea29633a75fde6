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
// After a run, the value of a node is valid only if it is in keep, or nothing in g reads it (the
// loss, the gradients of the parameters), or an op other than this package's reads it (a
// Gorgonia op, a gorgonia.Read): those keep their own buffers. Read every other node's value
// during the run, or name it in keep. Call ShareBuffers once the graph is complete (gradients
// included: gorgonia.Grad adds nodes), before the first run; calling it again changes nothing.
func ShareBuffers(g *gorgonia.ExprGraph, keep ...*gorgonia.Node) {
	ar := &arena{free: map[bufKey][]any{}}
	ops := map[*gorgonia.Node]*customOp{}
	for _, n := range g.AllNodes() {
		if o, ok := n.Op().(*customOp); ok {
			if o.ar != nil {
				return // shared already
			}
			ops[n] = o
		}
	}
	pinned := map[*customOp]bool{}
	for _, n := range keep {
		if o, ok := ops[n]; ok {
			pinned[o] = true
		}
	}
	for _, n := range g.AllNodes() {
		c, custom := ops[n]
		for it := g.From(n.ID()); it.Next(); {
			p, ok := ops[it.Node().(*gorgonia.Node)]
			if !ok {
				continue
			}
			if !custom {
				pinned[p] = true
				continue
			}
			p.uses++
			c.release = append(c.release, p)
		}
	}
	for _, o := range ops {
		if o.uses == 0 || pinned[o] {
			o.uses = 0 // never returned: the op keeps its buffer
			continue
		}
		o.ar = ar
	}
	// Consumers release only producers that lend their buffers.
	for _, o := range ops {
		kept := o.release[:0]
		for _, p := range o.release {
			if p.ar != nil {
				kept = append(kept, p)
			}
		}
		o.release = kept
	}
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
