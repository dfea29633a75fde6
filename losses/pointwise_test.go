package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func pointwiseBuilder(in map[string]*G.Node) (*G.Node, error) { return Pointwise(in["a"], in["y"]) }

// TestPointwiseWorked: a = (0, 2, -3), y = (1, 0, 1) gives
// L = (ln 2 + ln(1+e^2) + ln(1+e^3)) / 3 and dL/da = (sigma(a) - y) / 3.
func TestPointwiseWorked(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	want := (math.Ln2 + math.Log(1+math.Exp(2)) + math.Log(1+math.Exp(3))) / 3 // (0.693147 + 2.126928 + 3.048587)/3 = 1.956221
	wantG := []float64{(0.5 - 1) / 3, sig(2) / 3, (sig(-3) - 1) / 3}
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, pointwiseBuilder,
			input{"a", []int{3}, []float64{0, 2, -3}, true},
			input{"y", []int{3}, []float64{1, 0, 1}, false})
		wantLoss(t, loss, want, rtol)
		assertClose(t, dt.String()+" grad a", grads["a"], wantG, rtol, atol)
	}
	if math.Abs(want-1.956221) > 1e-6 {
		t.Errorf("worked value %.7f", want)
	}
}

// TestPointwiseExtremeLogits: confident right answers cost 0, confident wrong ones cost |a|.
func TestPointwiseExtremeLogits(t *testing.T) {
	for _, dt := range dtypes {
		loss, grads := mustEval(t, dt, pointwiseBuilder,
			input{"a", []int{2, 2}, []float64{800, -800, -800, 800}, true},
			input{"y", []int{2, 2}, []float64{1, 0, 1, 0}, false})
		wantLoss(t, loss, 400, 1e-6)
		assertClose(t, dt.String()+" grad a", grads["a"], []float64{0, 0, -0.25, 0.25}, 0, 1e-7)
	}
}

func TestPointwiseFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	y := []float64{1, 0, 0.3, 1, 0, 0}
	checkFiniteDiff(t, pointwiseBuilder, 1e-6, 1e-9,
		input{"a", []int{2, 3}, randn(r, 6, 3), true},
		input{"y", []int{2, 3}, y, false})
}

func TestPointwiseLabelErrors(t *testing.T) {
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		_, _, err := evalGraph(tensor.Float64, pointwiseBuilder, true,
			input{"a", []int{1, 2}, []float64{0, 1}, true},
			input{"y", []int{1, 2}, []float64{1, bad}, false})
		if err == nil {
			t.Errorf("label %g: no error", bad)
		} else {
			t.Logf("label %g: %v", bad, err)
		}
	}
	g := G.NewGraph()
	a := G.NewVector(g, tensor.Float64, G.WithShape(3), G.WithName("a"))
	y := G.NewVector(g, tensor.Float32, G.WithShape(3), G.WithName("y"))
	if _, err := Pointwise(a, y); err == nil {
		t.Error("float64 scores with float32 labels: no error")
	}
}
