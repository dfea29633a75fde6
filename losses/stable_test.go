package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// sumOf wraps a node-to-node function into a scalar loss sum_i w_i f(x)_i with fixed random
// weights w, so that finite differences exercise every output element.
func sumOf(f func(x *G.Node) (*G.Node, error), w []float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		y, err := f(in["x"])
		if err != nil {
			return nil, err
		}
		wn := G.NewConstant(fromFloat64(w, y.Shape(), y.Dtype()))
		prod, err := G.HadamardProd(y, wn)
		if err != nil {
			return nil, err
		}
		return G.Sum(prod)
	}
}

func TestStableOpsFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	x := randn(r, 12, 2)
	for _, tc := range []struct {
		name string
		f    func(*G.Node) (*G.Node, error)
		out  int
	}{
		{"logSumExpRows", logSumExpRows, 3},
		{"logSoftmaxRows", logSoftmaxRows, 12},
		{"l2NormalizeRows", l2NormalizeRows, 12},
		{"softplus", softplus, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFiniteDiff(t, sumOf(tc.f, randn(r, tc.out, 1)), 1e-6, 1e-9, input{"x", []int{3, 4}, x, true})
		})
	}
}

// TestStableOpsValues checks values that a naive implementation gets wrong: huge and -Inf
// entries, in both dtypes.
func TestStableOpsValues(t *testing.T) {
	x := []float64{1000, 1000, math.Inf(-1), 999, -1000, -1000, 0, -1000}
	want := []float64{1000 + math.Log(2+math.Exp(-1)), math.Log(1 + 3*math.Exp(-1000))}
	for _, dt := range dtypes {
		got, _ := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) { return logSumExpRows(in["x"]) },
			input{"x", []int{2, 4}, x, false})
		assertClose(t, "logsumexp "+dt.String(), got, want, 1e-7, 0)

		lsm, _ := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) { return logSoftmaxRows(in["x"]) },
			input{"x", []int{1, 3}, []float64{1000, 1000, -1000}, false})
		assertClose(t, "log-softmax "+dt.String(), lsm, []float64{-math.Ln2, -math.Ln2, -2000 - math.Ln2}, 1e-7, 0)

		sp, _ := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) { return softplus(in["x"]) },
			input{"x", []int{4}, []float64{-800, -30, 0, 800}, false})
		assertClose(t, "softplus "+dt.String(), sp, []float64{0, math.Exp(-30), math.Ln2, 800}, 1e-6, 1e-300)

		nrm, _ := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) { return l2NormalizeRows(in["x"]) },
			input{"x", []int{2, 2}, []float64{3, 4, 0, 0}, false})
		assertClose(t, "l2 normalise "+dt.String(), nrm, []float64{0.6, 0.8, 0, 0}, 1e-6, 0)
	}
	// A row of -Inf (every candidate excluded) has log-sum-exp -Inf and no NaN gradient.
	_, grads := mustEval(t, tensor.Float64, sumOf(logSumExpRows, []float64{1, 1}),
		input{"x", []int{2, 2}, []float64{math.Inf(-1), math.Inf(-1), 0, 0}, true})
	assertClose(t, "gradient", grads["x"], []float64{0, 0, 0.5, 0.5}, 1e-12, 0)
}

// TestGraphReuse: a loss graph built once and run on new values (gorgonia.Let, Reset) gives the
// same loss and gradients as a fresh graph, as the trainer reuses one graph per shape. Note that
// a TapeMachine adds each run's gradient into the bound dual values: the caller zeroes them
// after reading, as Gorgonia's own solvers do.
func TestGraphReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	b, n, h := 3, 5, 4
	g := G.NewGraph()
	q := G.NewMatrix(g, tensor.Float64, G.WithShape(b, h), G.WithName("q"))
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(n, h), G.WithName("p"))
	loss, err := InfoNCE(q, p, 0.1, Cosine)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, q, p); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(q, p))
	defer vm.Close()
	for step := 0; step < 3; step++ {
		qd, pd := randn(r, b*h, 1), randn(r, n*h, 1)
		G.Let(q, tensor.New(tensor.WithShape(b, h), tensor.WithBacking(append([]float64(nil), qd...))))
		G.Let(p, tensor.New(tensor.WithShape(n, h), tensor.WithBacking(append([]float64(nil), pd...))))
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		got, _ := scalarOf(loss.Value())
		gq, _ := q.Grad()
		gp, _ := p.Grad()
		wantL, want := mustEval(t, tensor.Float64, infoNCEBuilder(0.1, Cosine),
			input{"q", []int{b, h}, qd, true}, input{"p", []int{n, h}, pd, true})
		wantLoss(t, got, wantL, 1e-12)
		assertClose(t, "reused grad q", gq.Data().([]float64), want["q"], 1e-10, 1e-14)
		assertClose(t, "reused grad p", gp.Data().([]float64), want["p"], 1e-10, 1e-14)
		gq.(tensor.Tensor).Zero()
		gp.(tensor.Tensor).Zero()
		vm.Reset()
	}
}
