package model

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Param is one trainable tensor. It lives outside any graph: every graph
// that uses it binds a node to Value itself (no copy), so an optimiser that
// updates Value in place updates every graph (so write into Value's data;
// do not replace Value once graphs are built). Name is the tensor's name in
// the safetensors checkpoint (see the tables in bow.go and transformer.go).
type Param struct {
	Name  string
	Value *tensor.Dense
}

// WriteParams writes the float32 parameters ps to w (a hash), in their order: for each, the
// line "name shape\n" (the shape as tensor.Shape prints it, e.g. "proj (384, 128)") and then its
// values' IEEE 754 bits, 4 bytes little-endian each. The ColBERT run's model hash (the PLAID
// index's manifest) and the retriever's teacher cache key hash these bytes.
func WriteParams(w io.Writer, ps []*Param) {
	var buf [4]byte
	for _, p := range ps {
		fmt.Fprintf(w, "%s %v\n", p.Name, p.Value.Shape())
		for _, v := range p.Value.Data().([]float32) {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
			w.Write(buf[:])
		}
	}
}

// Bound pairs a parameter with its node in one graph.
type Bound struct {
	Param *Param
	Node  *gorgonia.Node
}

// Binder creates, per graph, the one node of each parameter used in it, so a
// tower used twice in a graph (shared towers) uses one node per parameter and
// Gorgonia sums the gradients of both uses.
type Binder struct {
	g     *gorgonia.ExprGraph
	nodes map[*Param]*gorgonia.Node
	order []Bound
}

// NewBinder returns a binder for graph g.
func NewBinder(g *gorgonia.ExprGraph) *Binder {
	return &Binder{g: g, nodes: map[*Param]*gorgonia.Node{}}
}

// Graph returns the binder's graph.
func (b *Binder) Graph() *gorgonia.ExprGraph { return b.g }

// Node returns the node of p in the binder's graph, creating it on first use
// with p.Value bound (gorgonia.WithValue) and named p.Name.
func (b *Binder) Node(p *Param) *gorgonia.Node {
	if n, ok := b.nodes[p]; ok {
		return n
	}
	s := p.Value.Shape()
	n := gorgonia.NewTensor(b.g, p.Value.Dtype(), s.Dims(),
		gorgonia.WithShape(s.Clone()...), gorgonia.WithValue(p.Value), gorgonia.WithName(p.Name))
	b.nodes[p] = n
	b.order = append(b.order, Bound{Param: p, Node: n})
	return n
}

// Bound returns the parameters bound so far with their nodes, in order of
// first use.
func (b *Binder) Bound() []Bound { return append([]Bound(nil), b.order...) }

// Nodes returns the nodes of Bound, in the same order (the wrt argument of
// gorgonia.Grad).
func (b *Binder) Nodes() gorgonia.Nodes {
	ns := make(gorgonia.Nodes, len(b.order))
	for i, bd := range b.order {
		ns[i] = bd.Node
	}
	return ns
}

// Initialisation. All draws come from one PCG stream per model, in the order
// the parameters are created, so a seed fixes every value.

func newParam(name string, dt tensor.Dtype, shape ...int) *Param {
	return &Param{Name: name, Value: tensor.New(tensor.WithShape(shape...), tensor.Of(dt))}
}

// fill sets every element to f().
func (p *Param) fill(f func() float64) {
	switch d := p.Value.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = float32(f())
		}
	case []float64:
		for i := range d {
			d[i] = f()
		}
	}
}

// normal fills p with N(0, std²) draws (BERT's initializer_range = 0.02).
func (p *Param) normal(r *rand.Rand, std float64) {
	p.fill(func() float64 { return r.NormFloat64() * std })
}

// xavier fills a [out,in] weight with U(-a, a), a = sqrt(6/(in+out))
// (Glorot and Bengio, 2010).
func (p *Param) xavier(r *rand.Rand) {
	s := p.Value.Shape()
	a := math.Sqrt(6 / float64(s[0]+s[1]))
	p.fill(func() float64 { return (2*r.Float64() - 1) * a })
}

func (p *Param) constant(c float64) { p.fill(func() float64 { return c }) }

// checkUnique fails on two parameters with one name.
func checkUnique(ps []*Param) error {
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.Name] {
			return fmt.Errorf("model: duplicate parameter name %q", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// paramNamed returns the parameter of ps called name, or nil.
func paramNamed(ps []*Param, name string) *Param {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return nil
}
