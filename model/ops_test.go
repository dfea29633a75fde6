package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// constNode adds a non-differentiable input (ids, masks) to the graph of x.
func constNode(x *gorgonia.Node, name string, v *tensor.Dense) *gorgonia.Node {
	return leafIn(x.Graph(), name, v)
}

func leafIn(g *gorgonia.ExprGraph, name string, v *tensor.Dense) *gorgonia.Node {
	return gorgonia.NewTensor(g, v.Dtype(), v.Dims(), gorgonia.WithShape(v.Shape().Clone()...), gorgonia.WithValue(v), gorgonia.WithName(name))
}

func maskDense(rows [][]float64) *tensor.Dense {
	var d []float64
	for _, r := range rows {
		d = append(d, r...)
	}
	return tensor.New(tensor.WithShape(len(rows), len(rows[0])), tensor.WithBacking(d))
}

// unary wraps a one-input op into a gradCase build with a weighted-sum loss.
func lossOf(f func(x []*gorgonia.Node) (*gorgonia.Node, error)) func(x []*gorgonia.Node) (*gorgonia.Node, error) {
	return func(x []*gorgonia.Node) (*gorgonia.Node, error) {
		out, err := f(x)
		if err != nil {
			return nil, err
		}
		return weightedSum(out, 7)
	}
}

func TestOpGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	mask := maskDense([][]float64{{1, 1, 0}, {1, 0, 0}})
	dropRNG := &RNG{}
	cases := []gradCase{
		{name: "Gather", leaves: []*tensor.Dense{randDense(r, 5, 3)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return Gather(x[0], constNode(x[0], "ids", intDense([]int{0, 2, 2, 4})))
		})},
		{name: "Embed", leaves: []*tensor.Dense{randDense(r, 6, 4), randDense(r, 4, 4), randDense(r, 2, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			ids := constNode(x[0], "ids", intDense([]int{1, 5, 0, 3, 3, 2}))
			types := constNode(x[0], "types", intDense([]int{0, 1, 1, 0, 0, 1}))
			return Embed(x[0], x[1], x[2], ids, types, 3)
		})},
		{name: "Linear", leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 2, 4), randDense(r, 2)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return Linear(x[0], x[1], x[2])
		})},
		{name: "MatMul NN", leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 4, 2)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MatMul(x[0], x[1], false, false)
		})},
		{name: "MatMul NT", leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 2, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MatMul(x[0], x[1], false, true)
		})},
		{name: "MatMul TN", leaves: []*tensor.Dense{randDense(r, 4, 3), randDense(r, 4, 2)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MatMul(x[0], x[1], true, false)
		})},
		{name: "MatMul TT", leaves: []*tensor.Dense{randDense(r, 4, 3), randDense(r, 2, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MatMul(x[0], x[1], true, true)
		})},
		{name: "LayerNorm", leaves: []*tensor.Dense{randDense(r, 3, 5), randDense(r, 5), randDense(r, 5)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return LayerNorm(x[0], x[1], x[2], LayerNormEps)
		})},
		{name: "GELU", leaves: []*tensor.Dense{randDense(r, 2, 5)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return GELU(x[0])
		})},
		{name: "Add twice (gradients summed)", leaves: []*tensor.Dense{randDense(r, 2, 3), randDense(r, 2, 3)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			a, err := Add(x[0], x[1])
			if err != nil {
				return nil, err
			}
			return Add(a, x[0])
		})},
		{name: "AttentionScores", leaves: []*tensor.Dense{randDense(r, 6, 4), randDense(r, 6, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return AttentionScores(x[0], x[1], 3, 2, 0.7)
		})},
		{name: "AttentionContext", leaves: []*tensor.Dense{randDense(r, 2, 2, 3, 3), randDense(r, 6, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return AttentionContext(x[0], x[1], 3, 2)
		})},
		{name: "HeadMatMul TN", leaves: []*tensor.Dense{randDense(r, 2, 2, 3, 3), randDense(r, 6, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return apply(headMMK{mode: modeTN, l: 3, heads: 2, scale: 1.3}, x[0], x[1])
		})},
		{name: "MaskedSoftmax", leaves: []*tensor.Dense{randDense(r, 2, 2, 3, 3)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MaskedSoftmax(x[0], constNode(x[0], "mask", mask), false)
		})},
		{name: "MaskedSoftmax causal", leaves: []*tensor.Dense{randDense(r, 2, 2, 3, 3)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MaskedSoftmax(x[0], constNode(x[0], "mask", maskDense([][]float64{{1, 1, 1}, {1, 1, 0}})), true)
		})},
		{name: "MeanPool", leaves: []*tensor.Dense{randDense(r, 6, 3)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MeanPool(x[0], constNode(x[0], "mask", mask))
		})},
		{name: "FirstToken", leaves: []*tensor.Dense{randDense(r, 6, 3)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return FirstToken(x[0], 3)
		})},
		{name: "Dropout", leaves: []*tensor.Dense{randDense(r, 4, 5)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return Dropout(x[0], 0.3, dropRNG)
		}), before: func() { dropRNG.R = rand.New(rand.NewPCG(5, 6)) }},
		// Gorgonia built-ins used by tests (weightedSum) and by losses.
		{name: "gorgonia.Mul", leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 4, 2)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return gorgonia.Mul(x[0], x[1])
		})},
		{name: "gorgonia.BatchedMatMul", leaves: []*tensor.Dense{randDense(r, 2, 3, 4), randDense(r, 2, 4, 2)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return gorgonia.BatchedMatMul(x[0], x[1])
		})},
		{name: "gorgonia.BroadcastAdd", leaves: []*tensor.Dense{randDense(r, 3, 4), randDense(r, 1, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return gorgonia.BroadcastAdd(x[0], x[1], nil, []byte{0})
		})},
		{name: "gorgonia.SoftMax", leaves: []*tensor.Dense{randDense(r, 3, 4)}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return gorgonia.SoftMax(x[0])
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gradCheck(t, c, 64, 1e-6)
		})
	}
}

// TestBuiltinLossOps checks the Gorgonia ops of weightedSum: the gradient of
// Σ x ⊙ R with respect to x is exactly R.
func TestBuiltinLossOps(t *testing.T) {
	g := gorgonia.NewGraph()
	xv := maskDense([][]float64{{1, 2, 3}, {4, 5, 6}})
	x := leafIn(g, "x", xv)
	loss, err := weightedSum(x, 7)
	if err != nil {
		t.Fatal(err)
	}
	grads, err := gorgonia.Grad(loss, x)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	want := values(randDense(rand.New(rand.NewPCG(7, 99)), 2, 3))
	assertClose(t, "dloss/dx", values(grads[0].Value()), want, 0)
	var sum float64
	for i, w := range want {
		sum += w * float64(i+1)
	}
	if got := scalar(t, loss); !close64(got, sum, 1e-12) {
		t.Errorf("loss = %v, want %v", got, sum)
	}
}

// forward runs out = f(leaves) once and returns its values.
func forward(t *testing.T, leaves []*tensor.Dense, f func(x []*gorgonia.Node) (*gorgonia.Node, error)) []float64 {
	t.Helper()
	g := gorgonia.NewGraph()
	nodes := make([]*gorgonia.Node, len(leaves))
	for i, l := range leaves {
		nodes[i] = gorgonia.NewTensor(g, l.Dtype(), l.Dims(), gorgonia.WithShape(l.Shape().Clone()...), gorgonia.WithValue(l), gorgonia.WithName("in"+string(rune('a'+i))))
	}
	out, err := f(nodes)
	if err != nil {
		t.Fatal(err)
	}
	runGraph(t, g)
	return values(out.Value())
}

func dense(shape []int, v ...float64) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v))
}

func TestOpValues(t *testing.T) {
	s2 := math.Sqrt(2)
	cases := []struct {
		name   string
		leaves []*tensor.Dense
		f      func(x []*gorgonia.Node) (*gorgonia.Node, error)
		want   []float64
	}{
		{"Gather", []*tensor.Dense{dense([]int{3, 2}, 1, 2, 3, 4, 5, 6)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return Gather(x[0], constNode(x[0], "ids", intDense([]int{2, 0, 2})))
		}, []float64{5, 6, 1, 2, 5, 6}},
		{"Embed", []*tensor.Dense{dense([]int{2, 1}, 10, 20), dense([]int{3, 1}, 1, 2, 3), dense([]int{2, 1}, 100, 200)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return Embed(x[0], x[1], x[2], constNode(x[0], "ids", intDense([]int{1, 0, 0, 1})), constNode(x[0], "types", intDense([]int{0, 1, 1, 1})), 2)
		}, []float64{121, 212, 211, 222}},
		{"Linear", []*tensor.Dense{dense([]int{1, 2}, 1, 2), dense([]int{2, 2}, 1, 0, 3, 4), dense([]int{2}, 0.5, -1)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return Linear(x[0], x[1], x[2])
		}, []float64{1.5, 10}},
		// mean 2.5, variance 1.25: (x-2.5)/sqrt(1.25) * gamma + beta
		{"LayerNorm", []*tensor.Dense{dense([]int{1, 4}, 1, 2, 3, 4), dense([]int{4}, 1, 1, 2, 1), dense([]int{4}, 0, 0, 0, 1)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return LayerNorm(x[0], x[1], x[2], LayerNormEps)
		}, []float64{-1.5 / math.Sqrt(1.25), -0.5 / math.Sqrt(1.25), 1 / math.Sqrt(1.25), 1 + 1.5/math.Sqrt(1.25)}},
		// gelu(1) = Φ(1), gelu(-1) = -Φ(-1), torch.nn.functional.gelu values.
		{"GELU", []*tensor.Dense{dense([]int{4}, 0, 1, -1, s2)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return GELU(x[0])
		}, []float64{0, 0.8413447460685429, -0.15865525393145707, s2 * 0.5 * (1 + math.Erf(1))}},
		// row 0 of batch 0 sees keys 0,1 (key 2 padded): softmax(0, ln 3) = (1/4, 3/4).
		// batch 1 sees key 0 only; causal row 0 sees key 0 only.
		{"MaskedSoftmax", []*tensor.Dense{dense([]int{2, 1, 3, 3}, 0, math.Log(3), 9, 1, 1, 1, 5, 5, 5, 7, 8, 9, 1, 2, 3, 4, 5, 6)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MaskedSoftmax(x[0], constNode(x[0], "mask", maskDense([][]float64{{1, 1, 0}, {1, 0, 0}})), false)
		}, []float64{0.25, 0.75, 0, 0.5, 0.5, 0, 0.5, 0.5, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0}},
		{"MaskedSoftmax causal", []*tensor.Dense{dense([]int{1, 1, 3, 3}, 4, 9, 9, 0, math.Log(3), 9, 0, 0, 0)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MaskedSoftmax(x[0], constNode(x[0], "mask", maskDense([][]float64{{1, 1, 1}})), true)
		}, []float64{1, 0, 0, 0.25, 0.75, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"MeanPool", []*tensor.Dense{dense([]int{6, 1}, 1, 2, 100, 4, 100, 100)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MeanPool(x[0], constNode(x[0], "mask", maskDense([][]float64{{1, 1, 0}, {1, 0, 0}})))
		}, []float64{1.5, 4}},
		{"MeanPool empty sequence", []*tensor.Dense{dense([]int{2, 1}, 3, 5)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return MeanPool(x[0], constNode(x[0], "mask", maskDense([][]float64{{0}, {1}})))
		}, []float64{0, 5}},
		{"FirstToken", []*tensor.Dense{dense([]int{4, 1}, 1, 2, 3, 4)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return FirstToken(x[0], 2)
		}, []float64{1, 3}},
		// q = k = [[1,0],[0,1]] per sequence, 1 head: scores = scale * identity
		{"AttentionScores", []*tensor.Dense{dense([]int{2, 2}, 1, 0, 0, 1), dense([]int{2, 2}, 1, 2, 3, 4)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return AttentionScores(x[0], x[1], 2, 1, 0.5)
		}, []float64{0.5, 1.5, 1, 2}},
		// 2 heads of width 1: head 0 uses column 0, head 1 column 1
		{"AttentionContext", []*tensor.Dense{dense([]int{1, 2, 2, 2}, 1, 0, 0.5, 0.5, 0, 1, 1, 0), dense([]int{2, 2}, 1, 10, 3, 30)}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return AttentionContext(x[0], x[1], 2, 2)
		}, []float64{1, 30, 2, 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertClose(t, c.name, forward(t, c.leaves, c.f), c.want, 1e-12)
		})
	}
}

func TestOpFloat32MatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := randDense(r, 6, 8)
	gamma, beta := randDense(r, 8), randDense(r, 8)
	f := func(x []*gorgonia.Node) (*gorgonia.Node, error) {
		n, err := LayerNorm(x[0], x[1], x[2], LayerNormEps)
		if err != nil {
			return nil, err
		}
		if n, err = GELU(n); err != nil {
			return nil, err
		}
		s, err := AttentionScores(n, n, 3, 2, 0.5)
		if err != nil {
			return nil, err
		}
		m := maskDense([][]float64{{1, 1, 0}, {1, 1, 1}})
		if x[0].Dtype() == tensor.Float32 {
			m = toFloat32(m)
		}
		if s, err = MaskedSoftmax(s, constNode(x[0], "mask", m), false); err != nil {
			return nil, err
		}
		return AttentionContext(s, n, 3, 2)
	}
	want := forward(t, []*tensor.Dense{x, gamma, beta}, f)
	got := forward(t, []*tensor.Dense{toFloat32(x), toFloat32(gamma), toFloat32(beta)}, f)
	assertClose(t, "float32", got, want, 1e-5)
}

func TestGatherRejectsBadIDs(t *testing.T) {
	g := gorgonia.NewGraph()
	w := leafIn(g, "w", dense([]int{2, 1}, 1, 2))
	if _, err := Gather(w, constNode(w, "ids", intDense([]int{0, 2}))); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	err := vm.RunAll()
	if err == nil {
		t.Fatal("id 2 with V = 2: want an error")
	}
	const want = "id 2 at position 1 is out of range [0,2)"
	if !contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestDropoutMask(t *testing.T) {
	rng := &RNG{R: rand.New(rand.NewPCG(1, 1))}
	x := tensor.New(tensor.WithShape(100, 100), tensor.Of(tensor.Float64))
	x.Memset(1.0)
	f := func(x []*gorgonia.Node) (*gorgonia.Node, error) { return Dropout(x[0], 0.25, rng) }
	a := forward(t, []*tensor.Dense{x}, f)
	var zeros int
	for _, v := range a {
		switch v {
		case 0:
			zeros++
		case 1 / 0.75:
		default:
			t.Fatalf("dropout output %v, want 0 or %v", v, 1/0.75)
		}
	}
	// 10000 Bernoulli(0.25) draws: mean 2500, sd 43.3.
	if zeros < 2300 || zeros > 2700 {
		t.Errorf("%d of 10000 dropped, want about 2500", zeros)
	}
	rng.R = rand.New(rand.NewPCG(1, 1))
	b := forward(t, []*tensor.Dense{x}, f)
	assertClose(t, "same seed", b, a, 0)
	if n, err := Dropout(nil, 0, rng); err != nil || n != nil {
		t.Errorf("Dropout(p=0) = %v, %v; want its input unchanged", n, err)
	}
}

// TestDoDiff runs the ops under Gorgonia's LispMachine (automatic
// differentiation through DoDiff) and compares with SymDiff's gradients.
func TestDoDiff(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	leaves := []*tensor.Dense{randDense(r, 6, 4), randDense(r, 4), randDense(r, 4), randDense(r, 3, 4), randDense(r, 3)}
	build := func(x []*gorgonia.Node) (*gorgonia.Node, error) {
		n, err := LayerNorm(x[0], x[1], x[2], LayerNormEps)
		if err != nil {
			return nil, err
		}
		if n, err = GELU(n); err != nil {
			return nil, err
		}
		if n, err = Linear(n, x[3], x[4]); err != nil {
			return nil, err
		}
		if n, err = MeanPool(n, constNode(x[0], "mask", maskDense([][]float64{{1, 1, 0}, {1, 0, 1}}))); err != nil {
			return nil, err
		}
		return weightedSum(n, 3)
	}
	grads := func(lisp bool) [][]float64 {
		g := gorgonia.NewGraph()
		nodes := make(gorgonia.Nodes, len(leaves))
		for i, l := range leaves {
			nodes[i] = gorgonia.NewTensor(g, tensor.Float64, l.Dims(), gorgonia.WithShape(l.Shape().Clone()...), gorgonia.WithValue(l.Clone()), gorgonia.WithName("p"+string(rune('a'+i))))
		}
		loss, err := build(nodes)
		if err != nil {
			t.Fatal(err)
		}
		var res [][]float64
		if lisp {
			vm := gorgonia.NewLispMachine(g)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			for _, n := range nodes {
				gv, err := n.Grad()
				if err != nil {
					t.Fatal(err)
				}
				res = append(res, values(gv))
			}
			return res
		}
		gs, err := gorgonia.Grad(loss, nodes...)
		if err != nil {
			t.Fatal(err)
		}
		runGraph(t, g)
		for _, gn := range gs {
			res = append(res, values(gn.Value()))
		}
		return res
	}
	sym, ad := grads(false), grads(true)
	for i := range sym {
		assertClose(t, "leaf gradient", ad[i], sym[i], 1e-12)
	}
}

// TestFastMath checks the float32 erf and exp against the math package.
func TestFastMath(t *testing.T) {
	var worstErf, worstExp float64
	for x := -7.0; x <= 7; x += 1e-3 {
		worstErf = math.Max(worstErf, math.Abs(erf32(x)-math.Erf(x)))
		if x <= 0 {
			worstExp = math.Max(worstExp, math.Abs(expNeg32(6*x)-math.Exp(6*x))/math.Exp(6*x))
		}
	}
	if worstErf > 1e-7 {
		t.Errorf("erf32: max absolute error %.3g, want <= 1e-7", worstErf)
	}
	if worstExp > 2e-7 {
		t.Errorf("expNeg32: max relative error %.3g, want <= 2e-7", worstExp)
	}
	if expNeg32(-100) != 0 {
		t.Errorf("expNeg32(-100) = %v, want 0", expNeg32(-100))
	}
}

// TestGELUFloat32 compares the float32 GELU and its gradient (assembly on
// amd64 with AVX2, Go elsewhere) with float64, including lengths that are
// not multiples of 8.
func TestGELUFloat32(t *testing.T) {
	x := make([]float64, 0, 2001)
	for v := -10.0; v <= 10; v += 0.01 {
		x = append(x, v)
	}
	g := make([]float64, len(x))
	for i := range g {
		g[i] = 1
	}
	x32, g32 := make([]float32, len(x)), make([]float32, len(x))
	for i := range x {
		x32[i], g32[i] = float32(x[i]), 1
	}
	y64, d64 := make([]float64, len(x)), make([]float64, len(x))
	y32, d32 := make([]float32, len(x)), make([]float32, len(x))
	gelu(y64, x)
	geluGrad(d64, x, g)
	gelu(y32, x32)
	geluGrad(d32, x32, g32)
	for i := range x {
		// 1 + erf loses digits in float32 where erf ≈ -1: absolute error up to 1e-6.
		if !close64(float64(y32[i]), y64[i], 1e-6) || !close64(float64(d32[i]), d64[i], 1e-6) {
			t.Errorf("x = %v: float32 gelu %v grad %v, float64 %v %v", x[i], y32[i], d32[i], y64[i], d64[i])
		}
	}
}
