package losses

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func tokenNLLBuilder(in map[string]*G.Node) (*G.Node, error) { return TokenNLL(in["logp"], in["mask"]) }

// TestTokenNLLWorked: two kept tokens with probabilities 1/2 and 1/4 and one padded position
// holding -Inf: L = (ln 2 + ln 4) / 2 = 1.5 ln 2, gradient -1/2 on each kept token, 0 on the
// padding.
func TestTokenNLLWorked(t *testing.T) {
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, tokenNLLBuilder,
			input{"logp", []int{3}, []float64{math.Log(0.5), math.Inf(-1), math.Log(0.25)}, true},
			input{"mask", []int{3}, []float64{1, 0, 1}, false})
		wantLoss(t, loss, 1.5*math.Ln2, rtol)
		assertClose(t, "dL/dlogp", grads["logp"], []float64{-0.5, 0, -0.5}, rtol, atol)
	}
}

// TestTokenNLLMaskedIgnored: changing a masked position changes neither the loss nor the
// gradient; changing a kept one changes the loss.
func TestTokenNLLMaskedIgnored(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const b, tt = 3, 4
	logp := make([]float64, b*tt)
	mask := make([]float64, b*tt)
	for i := range logp {
		logp[i] = -3 * r.Float64()
		if r.IntN(3) > 0 {
			mask[i] = 1
		}
	}
	mask[5], mask[6] = 0, 1
	ins := func(lp []float64) []input {
		return []input{{"logp", []int{b, tt}, lp, true}, {"mask", []int{b, tt}, mask, false}}
	}
	base, g0 := mustEval(t, tensor.Float64, tokenNLLBuilder, ins(logp)...)
	mod := append([]float64(nil), logp...)
	mod[5] = -50
	l1, g1 := mustEval(t, tensor.Float64, tokenNLLBuilder, ins(mod)...)
	if l1 != base {
		t.Errorf("masked position changed the loss: %g -> %g", base, l1)
	}
	assertClose(t, "gradient", g1["logp"], g0["logp"], 0, 0)
	mod[6] = -50
	if l2, _ := mustEval(t, tensor.Float64, tokenNLLBuilder, ins(mod)...); l2 == base {
		t.Error("a kept position did not change the loss")
	}
	checkFiniteDiff(t, tokenNLLBuilder, 1e-6, 1e-9, ins(logp)...)
}

func TestTokenNLLEdges(t *testing.T) {
	loss, grads := mustEval(t, tensor.Float64, tokenNLLBuilder,
		input{"logp", []int{2}, []float64{-1, -2}, true}, input{"mask", []int{2}, []float64{0, 0}, false})
	if loss != 0 || grads["logp"][0] != 0 || grads["logp"][1] != 0 {
		t.Errorf("empty mask: loss %g, grad %v; want 0", loss, grads["logp"])
	}
	_, _, err := evalGraph(tensor.Float64, tokenNLLBuilder, true,
		input{"logp", []int{2}, []float64{-1, -2}, true}, input{"mask", []int{2}, []float64{1, 0.5}, false})
	if err == nil || !strings.Contains(err.Error(), "mask[1] = 0.5") {
		t.Errorf("mask 0.5: %v", err)
	}
	_, _, err = evalGraph(tensor.Float64, tokenNLLBuilder, false,
		input{"logp", []int{2}, []float64{-1, -2}, true}, input{"mask", []int{1, 2}, []float64{1, 1}, false})
	if err == nil || !strings.Contains(err.Error(), "TokenNLL: mask has shape") {
		t.Errorf("shape mismatch: %v", err)
	}
}
