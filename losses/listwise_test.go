package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func listwiseBuilder(in map[string]*G.Node) (*G.Node, error) { return Listwise(in["a"], in["labels"]) }

func TestListwiseGolden(t *testing.T) {
	c := goldenCases(t, "listwise")[0]
	a, as := c.array(t, "a")
	labels, ls := c.array(t, "labels")
	ga, _ := c.array(t, "grad_a")
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, listwiseBuilder, input{"a", as, a, true}, input{"labels", ls, labels, false})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_a", grads["a"], ga, rtol, atol)
		})
	}
}

// TestListwiseWorked: one query, scores (0, ln 3), labels (1, 1): softmax = (1/4, 3/4),
// t = (1/2, 1/2), L = -(ln(1/4) + ln(3/4))/2, dL/da = softmax - t = (-1/4, 1/4).
// Shifting every score by 1000 changes nothing (max-subtracted log-softmax).
func TestListwiseWorked(t *testing.T) {
	want := -(math.Log(0.25) + math.Log(0.75)) / 2
	for _, shift := range []float64{0, 1000} {
		for _, dt := range dtypes {
			rtol, atol := tolerances(dt)
			if shift != 0 && dt == tensor.Float32 {
				rtol, atol = 1e-3, 1e-4 // ln 3 + 1000 loses digits when stored as float32
			}
			loss, grads := mustEval(t, dt, listwiseBuilder,
				input{"a", []int{1, 2}, []float64{shift, shift + math.Log(3)}, true},
				input{"labels", []int{1, 2}, []float64{1, 1}, false})
			wantLoss(t, loss, want, rtol)
			assertClose(t, "grad a", grads["a"], []float64{-0.25, 0.25}, rtol, atol)
		}
	}
}

func TestListwiseFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	checkFiniteDiff(t, listwiseBuilder, 1e-6, 1e-9,
		input{"a", []int{2, 4}, randn(r, 8, 2), true},
		input{"labels", []int{2, 4}, []float64{0, 1, 3, 0, 2, 2, 0, 1}, false})
}

func TestListwiseLabelErrors(t *testing.T) {
	for name, labels := range map[string][]float64{
		"negative": {1, -1, 0, 1},
		"zero row": {1, 0, 0, 0},
		"NaN":      {math.NaN(), 1, 1, 1},
	} {
		_, _, err := evalGraph(tensor.Float64, listwiseBuilder, true,
			input{"a", []int{2, 2}, []float64{0, 1, 2, 3}, true},
			input{"labels", []int{2, 2}, labels, false})
		if err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	g := G.NewGraph()
	a := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("a"))
	l := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("l"))
	if _, err := Listwise(a, l); err == nil {
		t.Error("labels [2,4] for scores [2,3]: no error")
	}
}
