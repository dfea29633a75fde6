package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func klDistillBuilder(tauS, tauT float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) { return KLDistill(in["s"], in["t"], tauS, tauT) }
}

// klDistillRegistered builds kl_distill through the losses table from [B*K] scores.
func klDistillRegistered(b, k int, teacher []float64, tauS, tauT float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		spec, err := Lookup("kl_distill")
		if err != nil {
			return nil, err
		}
		return spec.Build(Inputs{Scores: in["s"], B: b, K: k, Temperature: tauS, TeacherTemperature: tauT,
			Teacher: fromFloat64(append([]float64(nil), teacher...), tensor.Shape{b, k}, in["s"].Dtype())})
	}
}

// TestKLDistillGolden matches the PyTorch kl_distill case (batchmean reduction): the loss and
// grad_student_scores, called directly and through the losses table.
func TestKLDistillGolden(t *testing.T) {
	c := goldenCases(t, "kl_distill")[0]
	s, ss := c.array(t, "student_scores")
	te, ts := c.array(t, "teacher_scores")
	gs, _ := c.array(t, "grad_student_scores")
	tauS, tauT := c.num(t, "tau_student"), c.num(t, "tau_teacher")
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, klDistillBuilder(tauS, tauT), input{"s", ss, s, true}, input{"t", ts, te, false})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_student_scores", grads["s"], gs, rtol, atol)
		})
		t.Run("registered/"+dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, klDistillRegistered(ss[0], ss[1], te, tauS, tauT), input{"s", []int{ss[0] * ss[1]}, s, true})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_student_scores", grads["s"], gs, rtol, atol)
		})
	}
}

func TestKLDistillFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, taus := range [][2]float64{{1, 2}, {0.2, 0.5}} {
		checkFiniteDiff(t, klDistillBuilder(taus[0], taus[1]), 1e-6, 1e-9,
			input{"s", []int{3, 4}, randn(r, 12, 1), true},
			input{"t", []int{3, 4}, randn(r, 12, 2), false})
	}
}

// TestKLDistillInvariants: KL is 0 (with zero gradient) when the tempered distributions are
// equal, whatever per-query offset either model's scores carry; on random scores it is > 0,
// equals the divergence computed in plain Go, and its gradient is (p_S - p_T)/(tauS B).
func TestKLDistillInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	b, k := 3, 5
	tauS, tauT := 0.5, 2.0
	s := randn(r, b*k, 1)
	te := make([]float64, b*k) // t/tauT = s/tauS + c_b
	for i := range b {
		c := 5 * r.NormFloat64()
		for j := range k {
			te[i*k+j] = tauT * (s[i*k+j]/tauS + c)
		}
	}
	loss, grads := mustEval(t, tensor.Float64, klDistillBuilder(tauS, tauT),
		input{"s", []int{b, k}, s, true}, input{"t", []int{b, k}, te, false})
	if math.Abs(loss) > 1e-14 {
		t.Errorf("KL of equal distributions = %g, want 0", loss)
	}
	assertClose(t, "grad of equal distributions", grads["s"], make([]float64, b*k), 0, 1e-14)

	for trial := range 5 {
		s, te := randn(r, b*k, 2), randn(r, b*k, 3)
		loss, grads := mustEval(t, tensor.Float64, klDistillBuilder(tauS, tauT),
			input{"s", []int{b, k}, s, true}, input{"t", []int{b, k}, te, false})
		want, wantG := 0.0, make([]float64, b*k)
		for i := range b {
			ps, pt := softmaxScaled(s[i*k:(i+1)*k], tauS), softmaxScaled(te[i*k:(i+1)*k], tauT)
			for j := range k {
				want += pt[j] * math.Log(pt[j]/ps[j]) / float64(b)
				wantG[i*k+j] = (ps[j] - pt[j]) / (tauS * float64(b))
			}
		}
		if !(loss > 0) {
			t.Errorf("trial %d: KL %g, want > 0", trial, loss)
		}
		wantLoss(t, loss, want, 1e-10)
		assertClose(t, "dL/ds", grads["s"], wantG, 1e-9, 1e-14)
	}
}

// TestKLDistillRemovedCandidate: a teacher score of -Inf gives the loss of the list without that
// candidate in the teacher's distribution, and extreme scores (1e4 apart) give a finite loss in
// both dtypes.
func TestKLDistillRemovedCandidate(t *testing.T) {
	s := []float64{0.3, -1, 2, 0.5}
	te := []float64{1, math.Inf(-1), 0, 2}
	loss, _ := mustEval(t, tensor.Float64, klDistillBuilder(1, 1),
		input{"s", []int{1, 4}, s, true}, input{"t", []int{1, 4}, te, false})
	ps, pt := softmaxScaled(s, 1), softmaxScaled(te, 1)
	want := 0.0
	for j := range s {
		if pt[j] > 0 {
			want += pt[j] * math.Log(pt[j]/ps[j])
		}
	}
	wantLoss(t, loss, want, 1e-12)

	for _, dt := range dtypes {
		loss, grads := mustEval(t, dt, klDistillBuilder(1, 1),
			input{"s", []int{1, 3}, []float64{0, 0, 0}, true}, input{"t", []int{1, 3}, []float64{-1e4, 0, -2e4}, false})
		wantLoss(t, loss, math.Log(3), 1e-6)
		assertClose(t, dt.String()+" grad", grads["s"], []float64{1.0 / 3, -2.0 / 3, 1.0 / 3}, 1e-6, 1e-7)
	}
}

func TestKLDistillErrors(t *testing.T) {
	g := G.NewGraph()
	s := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("s"))
	te := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("t"))
	t4 := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("t4"))
	for name, f := range map[string]func() error{
		"tauStudent 0":    func() error { _, err := KLDistill(s, te, 0, 1); return err },
		"tauTeacher -1":   func() error { _, err := KLDistill(s, te, 1, -1); return err },
		"tauTeacher +Inf": func() error { _, err := KLDistill(s, te, 1, math.Inf(1)); return err },
		"shape":           func() error { _, err := KLDistill(s, t4, 1, 1); return err },
		"nil teacher":     func() error { _, err := KLDistill(s, nil, 1, 1); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	loss, err := KLDistill(s, te, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, te); err == nil {
		t.Error("gradient with respect to the teacher: no error, want none to exist")
	}

	spec, _ := Lookup("kl_distill")
	flat := G.NewVector(g, tensor.Float64, G.WithShape(6), G.WithName("flat"))
	for name, in := range map[string]Inputs{
		"no teacher":    {Scores: flat, B: 2, K: 3, Temperature: 1, TeacherTemperature: 1},
		"teacher shape": {Scores: flat, B: 2, K: 3, Temperature: 1, TeacherTemperature: 1, Teacher: tensor.New(tensor.WithShape(3, 2), tensor.Of(tensor.Float64))},
		"no tau":        {Scores: flat, B: 2, K: 3, Teacher: tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float64))},
	} {
		if _, err := spec.Build(in); err == nil {
			t.Errorf("registered, %s: no error", name)
		} else {
			t.Logf("registered, %s: %v", name, err)
		}
	}
}
