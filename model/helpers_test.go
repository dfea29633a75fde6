package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// randDense returns a float64 tensor of N(0,1) draws.
func randDense(r *rand.Rand, shape ...int) *tensor.Dense {
	t := tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float64))
	for i, d := 0, t.Data().([]float64); i < len(d); i++ {
		d[i] = r.NormFloat64()
	}
	return t
}

func intDense(v []int) *tensor.Dense {
	return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(append([]int(nil), v...)))
}

// weightedSum returns Σ out ⊙ r for a fixed random r, a scalar loss whose
// gradient with respect to out is r (Gorgonia's Sum and HadamardProd, which
// TestBuiltinLossOps checks).
func weightedSum(out *gorgonia.Node, seed uint64) (*gorgonia.Node, error) {
	r := randDense(rand.New(rand.NewPCG(seed, 99)), out.Shape()...)
	if out.Dtype() == tensor.Float32 {
		r = toFloat32(r)
	}
	rn := gorgonia.NewTensor(out.Graph(), out.Dtype(), out.Dims(), gorgonia.WithShape(out.Shape()...), gorgonia.WithValue(r), gorgonia.WithName(fmt.Sprintf("R%d", seed)))
	p, err := gorgonia.HadamardProd(out, rn)
	if err != nil {
		return nil, err
	}
	return gorgonia.Sum(p)
}

func toFloat32(t *tensor.Dense) *tensor.Dense {
	src := t.Data().([]float64)
	dst := make([]float32, len(src))
	for i, v := range src {
		dst[i] = float32(v)
	}
	return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(dst))
}

func scalar(t *testing.T, n *gorgonia.Node) float64 {
	t.Helper()
	switch v := n.Value().Data().(type) {
	case float64:
		return v
	case float32:
		return float64(v)
	}
	t.Fatalf("value of %v is %T, want a scalar", n, n.Value().Data())
	return 0
}

func values(v gorgonia.Value) []float64 {
	switch d := v.Data().(type) {
	case []float64:
		return append([]float64(nil), d...)
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out
	}
	panic(fmt.Sprintf("values of %T", v.Data()))
}

// gradCase is a finite-difference check: build returns a scalar loss of the
// leaves (float64 tensors, each bound to a node by gradCheck).
type gradCase struct {
	name   string
	leaves []*tensor.Dense
	build  func(x []*gorgonia.Node) (*gorgonia.Node, error)
	before func() // called before every run (e.g. to reseed dropout)
}

// gradCheck compares the symbolic gradient of the loss with respect to every
// leaf with central differences, element by element (at most maxElems per
// leaf, spread evenly).
func gradCheck(t *testing.T, c gradCase, maxElems int, tol float64) {
	t.Helper()
	g := gorgonia.NewGraph()
	nodes := make([]*gorgonia.Node, len(c.leaves))
	for i, l := range c.leaves {
		nodes[i] = gorgonia.NewTensor(g, l.Dtype(), l.Dims(), gorgonia.WithShape(l.Shape().Clone()...), gorgonia.WithValue(l), gorgonia.WithName(fmt.Sprintf("leaf%d", i)))
	}
	loss, err := c.build(nodes)
	if err != nil {
		t.Fatalf("%s: build: %v", c.name, err)
	}
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = fmt.Sprintf("leaf%d", i)
	}
	fdCheck(t, c.name, loss, nodes, c.leaves, names, c.before, maxElems, tol)
}

// fdCheck differentiates loss with respect to wrt (nodes bound to the
// float64 tensors vals) and compares with central differences.
func fdCheck(t *testing.T, name string, loss *gorgonia.Node, wrt []*gorgonia.Node, vals []*tensor.Dense, names []string, before func(), maxElems int, tol float64) {
	t.Helper()
	grads, err := gorgonia.Grad(loss, wrt...)
	if err != nil {
		t.Fatalf("%s: grad: %v", name, err)
	}
	vm := gorgonia.NewTapeMachine(loss.Graph())
	defer vm.Close()
	run := func() float64 {
		if before != nil {
			before()
		}
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatalf("%s: run: %v", name, err)
		}
		return scalar(t, loss)
	}
	run()
	analytic := make([][]float64, len(grads))
	for i, gr := range grads {
		analytic[i] = values(gr.Value())
	}
	const eps = 1e-6
	for i, l := range vals {
		d := l.Data().([]float64)
		step := 1
		if len(d) > maxElems {
			step = len(d) / maxElems
		}
		for j := 0; j < len(d); j += step {
			orig := d[j]
			d[j] = orig + eps
			up := run()
			d[j] = orig - eps
			down := run()
			d[j] = orig
			num := (up - down) / (2 * eps)
			an := analytic[i][j]
			if math.Abs(num-an) > tol*math.Max(1, math.Max(math.Abs(num), math.Abs(an))) {
				t.Errorf("%s: d loss / d %s[%d] = %.9g analytic, %.9g numeric", name, names[i], j, an, num)
			}
		}
	}
}

func close64(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func assertClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !close64(got[i], want[i], tol) {
			t.Errorf("%s[%d] = %.9g, want %.9g", what, i, got[i], want[i])
		}
	}
}

// runGraph runs g once with a fresh tape machine.
func runGraph(t *testing.T, g *gorgonia.ExprGraph) {
	t.Helper()
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
}
