package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func marginMSEBuilder(sim Similarity) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		return MarginMSE(in["q"], in["pPos"], in["pNeg"], in["tPos"], in["tNeg"], sim)
	}
}

// marginMSERegistered builds margin_mse through the losses table: P is pPos then pNeg, the
// teacher [B,2] is tPos and tNeg side by side.
func marginMSERegistered(sim Similarity, tPos, tNeg []float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		spec, err := Lookup("margin_mse")
		if err != nil {
			return nil, err
		}
		t := make([]float64, 0, 2*len(tPos))
		for i := range tPos {
			t = append(t, tPos[i], tNeg[i])
		}
		return spec.Build(Inputs{Q: in["q"], P: in["p"], Similarity: sim,
			Teacher: fromFloat64(t, tensor.Shape{len(tPos), 2}, in["q"].Dtype())})
	}
}

// TestMarginMSEGolden matches the PyTorch margin_mse case (dot): loss, grad_q, grad_d_pos and
// grad_d_neg, called directly and through the losses table.
func TestMarginMSEGolden(t *testing.T) {
	c := goldenCases(t, "margin_mse")[0]
	sim, err := ParseSimilarity(c["similarity"].(string))
	if err != nil {
		t.Fatal(err)
	}
	q, qs := c.array(t, "q")
	pos, ps := c.array(t, "d_pos")
	neg, ns := c.array(t, "d_neg")
	tp, ts := c.array(t, "teacher_pos")
	tn, _ := c.array(t, "teacher_neg")
	gq, _ := c.array(t, "grad_q")
	gp, _ := c.array(t, "grad_d_pos")
	gn, _ := c.array(t, "grad_d_neg")
	for _, dt := range dtypes {
		t.Run(sim.String()+"/"+dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, marginMSEBuilder(sim),
				input{"q", qs, q, true}, input{"pPos", ps, pos, true}, input{"pNeg", ns, neg, true},
				input{"tPos", ts, tp, false}, input{"tNeg", ts, tn, false})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_q", grads["q"], gq, rtol, atol)
			assertClose(t, "grad_d_pos", grads["pPos"], gp, rtol, atol)
			assertClose(t, "grad_d_neg", grads["pNeg"], gn, rtol, atol)
		})
		t.Run("registered/"+dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, marginMSERegistered(sim, tp, tn),
				input{"q", qs, q, true}, input{"p", []int{2 * qs[0], qs[1]}, append(append([]float64(nil), pos...), neg...), true})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_q", grads["q"], gq, rtol, atol)
			assertClose(t, "grad_d_pos ++ grad_d_neg", grads["p"], append(append([]float64(nil), gp...), gn...), rtol, atol)
		})
	}
}

// TestMarginMSEFiniteDifference covers cosine, which the golden case does not.
func TestMarginMSEFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	b, h := 3, 4
	for _, sim := range []Similarity{Dot, Cosine} {
		t.Run(sim.String(), func(t *testing.T) {
			checkFiniteDiff(t, marginMSEBuilder(sim), 1e-5, 1e-8,
				input{"q", []int{b, h}, randn(r, b*h, 1), true},
				input{"pPos", []int{b, h}, randn(r, b*h, 1), true},
				input{"pNeg", []int{b, h}, randn(r, b*h, 1), true},
				input{"tPos", []int{b}, randn(r, b, 3), false},
				input{"tNeg", []int{b}, randn(r, b, 3), false})
		})
	}
}

// rowDots returns a_i · b_i of two [B,H] arrays.
func rowDots(a, b []float64, h int) []float64 {
	out := make([]float64, len(a)/h)
	for i := range out {
		for k := 0; k < h; k++ {
			out[i] += a[i*h+k] * b[i*h+k]
		}
	}
	return out
}

// TestMarginMSEInvariants: the loss is 0 with zero gradient when the teacher's margins are the
// student's (whatever offset the teacher's scores carry), and otherwise equals the mean squared
// margin error computed in plain Go, with the gradient 2 e_i / B on the positive's score.
func TestMarginMSEInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	b, h := 4, 5
	q, pos, neg := randn(r, b*h, 1), randn(r, b*h, 1), randn(r, b*h, 1)
	sp, sn := rowDots(q, pos, h), rowDots(q, neg, h)
	ins := func(tp, tn []float64) []input {
		return []input{{"q", []int{b, h}, q, true}, {"pPos", []int{b, h}, pos, true}, {"pNeg", []int{b, h}, neg, true},
			{"tPos", []int{b}, tp, false}, {"tNeg", []int{b}, tn, false}}
	}
	tp, tn := make([]float64, b), make([]float64, b)
	for i := range tp {
		off := 10 * r.NormFloat64()
		tp[i], tn[i] = sp[i]+off, sn[i]+off
	}
	loss, grads := mustEval(t, tensor.Float64, marginMSEBuilder(Dot), ins(tp, tn)...)
	if math.Abs(loss) > 1e-24 {
		t.Errorf("loss with the student's own margins = %g, want 0", loss)
	}
	for _, k := range []string{"q", "pPos", "pNeg"} {
		assertClose(t, "grad "+k, grads[k], make([]float64, b*h), 0, 1e-12)
	}

	tp, tn = randn(r, b, 3), randn(r, b, 3)
	want, wantGPos := 0.0, make([]float64, b*h)
	for i := range b {
		e := (sp[i] - sn[i]) - (tp[i] - tn[i])
		want += e * e / float64(b)
		for k := 0; k < h; k++ { // ds_pos_i/dpPos_i = q_i
			wantGPos[i*h+k] = 2 * e / float64(b) * q[i*h+k]
		}
	}
	loss, grads = mustEval(t, tensor.Float64, marginMSEBuilder(Dot), ins(tp, tn)...)
	wantLoss(t, loss, want, 1e-12)
	assertClose(t, "grad pPos", grads["pPos"], wantGPos, 1e-12, 1e-15)
	if loss <= 0 {
		t.Errorf("loss %g, want > 0", loss)
	}
}

func TestMarginMSEErrors(t *testing.T) {
	g := G.NewGraph()
	m := func(name string, dt tensor.Dtype, s ...int) *G.Node {
		return G.NewTensor(g, dt, len(s), G.WithShape(s...), G.WithName(name))
	}
	f64 := tensor.Float64
	q, p, tv := m("q", f64, 3, 4), m("p", f64, 3, 4), m("t", f64, 3)
	for name, f := range map[string]func() error{
		"pNeg rows":  func() error { _, err := MarginMSE(q, p, m("p2", f64, 2, 4), tv, tv, Dot); return err },
		"pPos width": func() error { _, err := MarginMSE(q, m("p5", f64, 3, 5), p, tv, tv, Dot); return err },
		"tNeg shape": func() error { _, err := MarginMSE(q, p, p, tv, m("t4", f64, 4), Dot); return err },
		"dtype":      func() error { _, err := MarginMSE(q, p, p, tv, m("t32", tensor.Float32, 3), Dot); return err },
		"nil":        func() error { _, err := MarginMSE(q, p, nil, tv, tv, Dot); return err },
		"similarity": func() error { _, err := MarginMSE(q, p, p, tv, tv, Similarity(9)); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// No gradient can be taken into the teacher.
	loss, err := MarginMSE(q, p, p, tv, tv, Dot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, tv); err == nil {
		t.Error("gradient with respect to the teacher's scores: no error, want none to exist")
	}

	// Through the table: a batch that is not one hard negative per query, a missing or
	// misshapen teacher.
	spec, _ := Lookup("margin_mse")
	teacher := tensor.New(tensor.WithShape(3, 2), tensor.Of(tensor.Float64))
	for name, in := range map[string]Inputs{
		"N != 2B":       {Q: q, P: m("p9", f64, 9, 4), Teacher: teacher},
		"no teacher":    {Q: q, P: m("p6", f64, 6, 4)},
		"teacher shape": {Q: q, P: m("p6b", f64, 6, 4), Teacher: tensor.New(tensor.WithShape(3, 3), tensor.Of(tensor.Float64))},
	} {
		if _, err := spec.Build(in); err == nil {
			t.Errorf("registered, %s: no error", name)
		} else {
			t.Logf("registered, %s: %v", name, err)
		}
	}

	// A NaN or infinite teacher score fails the run, naming the element.
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		_, _, err := evalGraph(tensor.Float64, marginMSEBuilder(Dot), true,
			input{"q", []int{2, 2}, []float64{1, 0, 0, 1}, true},
			input{"pPos", []int{2, 2}, []float64{1, 0, 0, 1}, true},
			input{"pNeg", []int{2, 2}, []float64{0, 1, 1, 0}, true},
			input{"tPos", []int{2}, []float64{1, bad}, false},
			input{"tNeg", []int{2}, []float64{0, 0}, false})
		if err == nil {
			t.Errorf("teacher score %g: no error", bad)
		} else {
			t.Logf("teacher score %g: %v", bad, err)
		}
	}
}
