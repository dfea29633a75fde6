package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func replugBuilder(tauR, tauLM float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) { return RePlugKL(in["s"], in["lm"], tauR, tauLM) }
}

func TestRePlugKLGolden(t *testing.T) {
	c := goldenCases(t, "replug_kl")[0]
	s, ss := c.array(t, "retriever_scores")
	lm, ls := c.array(t, "lm_loglik")
	gs, _ := c.array(t, "grad_retriever_scores")
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, replugBuilder(c.num(t, "tau_retriever"), c.num(t, "tau_lm")),
				input{"s", ss, s, true}, input{"lm", ls, lm, false})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_retriever_scores", grads["s"], gs, rtol, atol)
		})
	}
}

// softmaxScaled is softmax(x/tau) of one row, in plain Go.
func softmaxScaled(x []float64, tau float64) []float64 {
	out := make([]float64, len(x))
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v/tau)
	}
	z := 0.0
	for i, v := range x {
		out[i] = math.Exp(v/tau - m)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// TestRePlugKLGradientProperty: on random inputs the gradient on s is (p_R - p_LM)/(tauR B)
// and the loss is the KL divergence computed in plain Go.
func TestRePlugKLGradientProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	b, k := 3, 5
	for _, taus := range [][2]float64{{0.1, 1}, {1, 0.5}, {0.05, 2}} {
		tauR, tauLM := taus[0], taus[1]
		s, lm := randn(r, b*k, 1), randn(r, b*k, 5)
		loss, grads := mustEval(t, tensor.Float64, replugBuilder(tauR, tauLM),
			input{"s", []int{b, k}, s, true}, input{"lm", []int{b, k}, lm, false})
		want := make([]float64, b*k)
		kl := 0.0
		for i := 0; i < b; i++ {
			pr := softmaxScaled(s[i*k:(i+1)*k], tauR)
			pl := softmaxScaled(lm[i*k:(i+1)*k], tauLM)
			for c := 0; c < k; c++ {
				want[i*k+c] = (pr[c] - pl[c]) / (tauR * float64(b))
				kl += pl[c] * math.Log(pl[c]/pr[c]) / float64(b)
			}
		}
		wantLoss(t, loss, kl, 1e-10)
		assertClose(t, "dL/ds", grads["s"], want, 1e-9, 1e-14)
	}
}

// TestRePlugKLZeroWhenAgreeing: identical distributions give KL 0 and zero gradient; LM
// log-likelihoods 1000 nats apart (a one-hot teacher) give a finite loss, -log p_R of the
// preferred passage.
func TestRePlugKLZeroWhenAgreeing(t *testing.T) {
	s := []float64{0.2, -0.1, 0.4}
	lm := []float64{2, -1, 4} // = s/0.1
	loss, grads := mustEval(t, tensor.Float64, replugBuilder(0.1, 1),
		input{"s", []int{1, 3}, s, true}, input{"lm", []int{1, 3}, lm, false})
	if math.Abs(loss) > 1e-12 {
		t.Errorf("KL of equal distributions = %g", loss)
	}
	assertClose(t, "grad", grads["s"], []float64{0, 0, 0}, 0, 1e-12)

	for _, dt := range dtypes {
		loss, _ = mustEval(t, dt, replugBuilder(1, 1),
			input{"s", []int{1, 3}, []float64{0, 0, 0}, true}, input{"lm", []int{1, 3}, []float64{-1000, 0, -2000}, false})
		wantLoss(t, loss, math.Log(3), 1e-6)
	}
}

func TestRePlugKLFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	checkFiniteDiff(t, replugBuilder(0.5, 2), 1e-6, 1e-9,
		input{"s", []int{2, 4}, randn(r, 8, 1), true},
		input{"lm", []int{2, 4}, randn(r, 8, 3), false})
}

func TestRePlugKLErrors(t *testing.T) {
	g := G.NewGraph()
	s := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("s"))
	lm := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("lm"))
	lm4 := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("lm4"))
	for name, f := range map[string]func() error{
		"tauR 0":   func() error { _, err := RePlugKL(s, lm, 0, 1); return err },
		"tauLM -1": func() error { _, err := RePlugKL(s, lm, 1, -1); return err },
		"shape":    func() error { _, err := RePlugKL(s, lm4, 1, 1); return err },
		"nil lm":   func() error { _, err := RePlugKL(s, nil, 1, 1); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// No gradient can be taken into the LM.
	loss, err := RePlugKL(s, lm, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, lm); err == nil {
		t.Error("gradient with respect to lmLogLik: no error, want none to exist")
	}
}
