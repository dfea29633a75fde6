package losses

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func pairwiseBuilder(in map[string]*G.Node) (*G.Node, error) { return Pairwise(in["pos"], in["neg"]) }

func TestPairwiseGolden(t *testing.T) {
	c := goldenCases(t, "pairwise")[0]
	pos, ps := c.array(t, "a_pos")
	neg, ns := c.array(t, "a_neg")
	gp, _ := c.array(t, "grad_a_pos")
	gn, _ := c.array(t, "grad_a_neg")
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, pairwiseBuilder, input{"pos", ps, pos, true}, input{"neg", ns, neg, true})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_a_pos", grads["pos"], gp, rtol, atol)
			assertClose(t, "grad_a_neg", grads["neg"], gn, rtol, atol)
		})
	}
}

// TestPairwiseExtremeMargins: margins of +-1000 give the exact limits (loss 0 or 1000 per
// pair, gradient 0 or -1/n), not Inf or NaN, in both dtypes.
func TestPairwiseExtremeMargins(t *testing.T) {
	for _, dt := range dtypes {
		loss, grads := mustEval(t, dt, pairwiseBuilder,
			input{"pos", []int{2}, []float64{1000, -1000}, true},
			input{"neg", []int{2}, []float64{0, 0}, true})
		wantLoss(t, loss, 500, 1e-6)
		assertClose(t, dt.String()+" grad pos", grads["pos"], []float64{0, -0.5}, 0, 1e-7)
	}
}

func TestPairwiseFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	checkFiniteDiff(t, pairwiseBuilder, 1e-6, 1e-9,
		input{"pos", []int{2, 3}, randn(r, 6, 2), true},
		input{"neg", []int{2, 3}, randn(r, 6, 2), true})
}

func TestPairwiseShapeError(t *testing.T) {
	g := G.NewGraph()
	a := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("a"))
	b := G.NewVector(g, tensor.Float64, G.WithShape(4), G.WithName("b"))
	if _, err := Pairwise(a, b); err == nil {
		t.Error("Pairwise([3], [4]): no error")
	}
}
