package losses

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func looDistillBuilder(tauR, tauT float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) { return LeaveOneOutDistill(in["s"], in["o"], tauR, tauT) }
}

// TestLeaveOneOutThreePassages is the hand-built 3-passage case: the reader answers with
// probability 0.8 from passage 0 and 0.1 from passages 1 and 2, and reads the three as their
// uniform mixture (MixtureLoss). With all three p = (0.8+0.1+0.1)/3 = 1/3; without passage 0,
// 0.1; without 1 or 2, 0.45. The loss worsens by o = log((1/3)/0.1) = log(10/3) without 0 and
// by log((1/3)/0.45) = log(20/27) (it improves) without 1 or 2; at tauT = 1 the teacher is
// exp(o) normalised: (10/3, 20/27, 20/27) / (130/27) = (9/13, 2/13, 2/13).
func TestLeaveOneOutThreePassages(t *testing.T) {
	ll := []float64{math.Log(0.8), math.Log(0.1), math.Log(0.1)}
	var calls [][]int
	mix := MixtureLoss(ll)
	o, err := LeaveOneOut(3, func(keep []int) (float64, error) {
		calls = append(calls, slices.Clone(keep))
		return mix(keep)
	})
	if err != nil {
		t.Fatal(err)
	}
	wantO := []float64{math.Log(10.0 / 3), math.Log(20.0 / 27), math.Log(20.0 / 27)}
	assertClose(t, "o", o, wantO, 1e-14, 1e-15)
	if want := [][]int{{0, 1, 2}, {1, 2}, {0, 2}, {0, 1}}; !slices.EqualFunc(calls, want, slices.Equal) {
		t.Errorf("contexts scored %v, want %v", calls, want)
	}
	full, _ := mix([]int{0, 1, 2})
	if want := math.Log(3); math.Abs(full-want) > 1e-15 {
		t.Errorf("loss with all three passages %.17g, want log 3", full)
	}
	teacher := softmaxScaled(o, 1)
	assertClose(t, "p_LOOP", teacher, []float64{9.0 / 13, 2.0 / 13, 2.0 / 13}, 1e-14, 1e-15)

	// The loss against a uniform retriever: KL(p_LOOP || 1/3) = sum p log(3p), gradient 1/3 - p.
	want := 9.0/13*math.Log(27.0/13) + 2*(2.0/13)*math.Log(6.0/13)
	wantG := []float64{1.0/3 - 9.0/13, 1.0/3 - 2.0/13, 1.0/3 - 2.0/13}
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, looDistillBuilder(1, 1), input{"s", []int{1, 3}, []float64{0, 0, 0}, true}, input{"o", []int{1, 3}, o, false})
		wantLoss(t, loss, want, rtol)
		assertClose(t, "dL/ds", grads["s"], wantG, rtol, atol)
		loss, grads = mustEval(t, dt, registeredBuilder("loo_distill", 1, 3, o, 1, 1), input{"s", []int{3}, []float64{0, 0, 0}, true})
		wantLoss(t, loss, want, rtol)
		assertClose(t, "dL/ds (table)", grads["s"], wantG, rtol, atol)
	}
}

// TestLeaveOneOutRedundantPassages: a reader that reads its passages together (a table of
// losses by context) and answers whenever passage 0 or its duplicate 1 is there. Removing
// either duplicate costs nothing, so leave-one-out gives them no credit over the useless
// passage 2 (perplexity distillation, scoring each passage alone, would).
func TestLeaveOneOutRedundantPassages(t *testing.T) {
	loss := func(keep []int) (float64, error) {
		if slices.Contains(keep, 0) || slices.Contains(keep, 1) {
			return 0.1, nil
		}
		return 3, nil
	}
	o, err := LeaveOneOut(3, loss)
	if err != nil {
		t.Fatal(err)
	}
	assertClose(t, "o", o, []float64{0, 0, 0}, 0, 0)
	if _, err := LeaveOneOut(1, loss); err == nil {
		t.Error("K = 1: no error")
	}
	if _, err := MixtureLoss([]float64{0})(nil); err == nil {
		t.Error("MixtureLoss of no passage: no error")
	}
}

// TestMixtureLossStable: log-likelihoods hundreds of nats below zero give the exact mixture.
func TestMixtureLossStable(t *testing.T) {
	got, err := MixtureLoss([]float64{-1000, -1000 + math.Log(3)})([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1000 - math.Log(2); math.Abs(got-want) > 1e-12 {
		t.Errorf("MixtureLoss = %.15g, want %.15g", got, want)
	}
}

func TestLeaveOneOutDistillFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	checkFiniteDiff(t, looDistillBuilder(0.5, 2), 1e-6, 1e-9,
		input{"s", []int{2, 4}, randn(r, 8, 1), true}, input{"o", []int{2, 4}, randn(r, 8, 2), false})
}

func TestLeaveOneOutDistillNoReaderGradient(t *testing.T) {
	g := G.NewGraph()
	s := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("s"))
	o := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("o"))
	loss, err := LeaveOneOutDistill(s, o, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, o); err == nil {
		t.Error("gradient with respect to the leave-one-out losses: no error, want none to exist")
	}
}
