package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func attentionDistillBuilder(tauR, tauA float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) { return AttentionDistill(in["s"], in["a"], tauR, tauA) }
}

// registeredBuilder builds a Lists loss with a teacher through the losses table from [B*K]
// scores.
func registeredBuilder(name string, b, k int, teacher []float64, tau, tauT float64) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		spec, err := Lookup(name)
		if err != nil {
			return nil, err
		}
		return spec.Build(Inputs{Scores: in["s"], B: b, K: k, Temperature: tau, TeacherTemperature: tauT,
			Teacher: fromFloat64(append([]float64(nil), teacher...), tensor.Shape{b, k}, in["s"].Dtype())})
	}
}

// TestAttentionMassHandComputed: 2 layers, 2 heads, L = 4, the answer predicted from positions
// 2 and 3, the passage at positions [1, 3).
func TestAttentionMassHandComputed(t *testing.T) {
	const heads, L = 2, 4
	// One causal attention matrix per (layer, head); rows are query positions.
	layer := func(h0, h1 [L][L]float64) []float64 {
		var out []float64
		for _, m := range [][L][L]float64{h0, h1} {
			for _, row := range m {
				out = append(out, row[:]...)
			}
		}
		return out
	}
	l0 := layer(
		[L][L]float64{{1, 0, 0, 0}, {0.5, 0.5, 0, 0}, {0.2, 0.3, 0.5, 0}, {0.1, 0.4, 0.4, 0.1}},
		[L][L]float64{{1, 0, 0, 0}, {0.9, 0.1, 0, 0}, {0.6, 0.2, 0.2, 0}, {0.25, 0.25, 0.25, 0.25}})
	l1 := layer(
		[L][L]float64{{1, 0, 0, 0}, {0.3, 0.7, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 1}},
		[L][L]float64{{1, 0, 0, 0}, {0.2, 0.8, 0, 0}, {0.4, 0.4, 0.2, 0}, {0.1, 0.1, 0.1, 0.7}})
	// Mass on keys 1, 2 from queries 2 and 3:
	// layer 0: head 0 (0.3+0.5) + (0.4+0.4) = 1.6; head 1 (0.2+0.2) + (0.25+0.25) = 0.9
	// layer 1: head 0 (1+0) + (0+0) = 1.0;         head 1 (0.4+0.2) + (0.1+0.1) = 0.8
	// alpha = (1.6+0.9+1.0+0.8) / (2 layers * 2 heads * 2 queries) = 4.3/8
	got, err := AttentionMass([][]float64{l0, l1}, heads, L, []int{2, 3}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4.3 / 8; math.Abs(got-want) > 1e-15 {
		t.Errorf("AttentionMass = %.17g, want %.17g", got, want)
	}
	for name, f := range map[string]func() (float64, error){
		"no layers":  func() (float64, error) { return AttentionMass(nil, heads, L, []int{2}, 1, 3) },
		"short":      func() (float64, error) { return AttentionMass([][]float64{l0[:10]}, heads, L, []int{2}, 1, 3) },
		"query":      func() (float64, error) { return AttentionMass([][]float64{l0}, heads, L, []int{4}, 1, 3) },
		"span":       func() (float64, error) { return AttentionMass([][]float64{l0}, heads, L, []int{2}, 3, 1) },
		"no queries": func() (float64, error) { return AttentionMass([][]float64{l0}, heads, L, nil, 1, 3) },
	} {
		if _, err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestAttentionDistillHandComputed: one query, two passages with attention masses 0.6 and 0.2,
// tauA = 0.2: p_ATTN = softmax(3, 1); the retriever uniform (s = 0): L = sum p log(2p), the
// gradient p_R - p_ATTN. Through the table it is the same.
func TestAttentionDistillHandComputed(t *testing.T) {
	e2 := math.Exp(2)
	p := []float64{e2 / (1 + e2), 1 / (1 + e2)}
	want := p[0]*math.Log(2*p[0]) + p[1]*math.Log(2*p[1])
	alpha := []float64{0.6, 0.2}
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, attentionDistillBuilder(1, 0.2),
			input{"s", []int{1, 2}, []float64{0, 0}, true}, input{"a", []int{1, 2}, alpha, false})
		wantLoss(t, loss, want, rtol)
		assertClose(t, "dL/ds", grads["s"], []float64{0.5 - p[0], 0.5 - p[1]}, rtol, atol)
		loss, grads = mustEval(t, dt, registeredBuilder("attention_distill", 1, 2, alpha, 1, 0.2), input{"s", []int{2}, []float64{0, 0}, true})
		wantLoss(t, loss, want, rtol)
		assertClose(t, "dL/ds (table)", grads["s"], []float64{0.5 - p[0], 0.5 - p[1]}, rtol, atol)
	}
}

func TestAttentionDistillFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	a := make([]float64, 12)
	for i := range a {
		a[i] = r.Float64() // masses in [0, 1)
	}
	checkFiniteDiff(t, attentionDistillBuilder(0.5, 0.1), 1e-6, 1e-9,
		input{"s", []int{3, 4}, randn(r, 12, 1), true}, input{"a", []int{3, 4}, a, false})
}

// TestAttentionDistillNoReaderGradient: the attention masses are a constant.
func TestAttentionDistillNoReaderGradient(t *testing.T) {
	g := G.NewGraph()
	s := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("s"))
	a := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("a"))
	loss, err := AttentionDistill(s, a, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, a); err == nil {
		t.Error("gradient with respect to the attention masses: no error, want none to exist")
	}
}
