package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func emdr2Builder(in map[string]*G.Node) (*G.Node, error) { return EMDR2(in["s"], in["ll"]) }

// TestEMDR2MatchesRAGSequenceGolden: with each passage's log-likelihood the sum of the golden
// case's target log-probabilities over its real tokens, EMDR² is the PyTorch RAG-Sequence loss
// and has its gradient on the retrieval logits, directly and through the table.
func TestEMDR2MatchesRAGSequenceGolden(t *testing.T) {
	c := goldenCases(t, "rag")[0]
	s, ss := c.array(t, "retrieval_logits")
	lp, ls := c.array(t, "target_logprobs")
	m, _ := c.array(t, "mask")
	gs, _ := c.array(t, "rag_sequence_grad_logits")
	b, k, T := ls[0], ls[1], ls[2]
	ll := make([]float64, b*k)
	for i := range b {
		for j := range k {
			for u := range T {
				if m[i*T+u] == 1 {
					ll[i*k+j] += lp[(i*k+j)*T+u]
				}
			}
		}
	}
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, emdr2Builder, input{"s", ss, s, true}, input{"ll", []int{b, k}, ll, false})
			wantLoss(t, loss, c.num(t, "rag_sequence_loss"), rtol)
			assertClose(t, "grad_logits", grads["s"], gs, rtol, atol)
			loss, grads = mustEval(t, dt, registeredBuilder("emdr2", b, k, ll, 1, 0), input{"s", []int{b * k}, s, true})
			wantLoss(t, loss, c.num(t, "rag_sequence_loss"), rtol)
			assertClose(t, "grad_logits (table)", grads["s"], gs, rtol, atol)
		})
	}
}

// TestEMDR2HandComputed: two passages, the retriever uniform, the answer's likelihood 0.5 and
// 0.1: L = -log(0.5*0.5 + 0.5*0.1) = -log 0.3; the posterior (0.25, 0.05)/0.3 = (5/6, 1/6), the
// gradient p_R - gamma = (-1/3, 1/3). With Temperature = 0.5 through the table the logits are s/0.5.
func TestEMDR2HandComputed(t *testing.T) {
	ll := []float64{math.Log(0.5), math.Log(0.1)}
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, emdr2Builder, input{"s", []int{1, 2}, []float64{0.3, 0.3}, true}, input{"ll", []int{1, 2}, ll, false})
		wantLoss(t, loss, -math.Log(0.3), rtol)
		assertClose(t, "dL/ds", grads["s"], []float64{-1.0 / 3, 1.0 / 3}, rtol, atol)
		loss, grads = mustEval(t, dt, registeredBuilder("emdr2", 1, 2, ll, 0.5, 0), input{"s", []int{2}, []float64{0.3, 0.3}, true})
		wantLoss(t, loss, -math.Log(0.3), rtol)
		assertClose(t, "dL/ds (table, tau 0.5)", grads["s"], []float64{-2.0 / 3, 2.0 / 3}, rtol, atol)
	}
}

func TestEMDR2FiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	checkFiniteDiff(t, emdr2Builder, 1e-6, 1e-9,
		input{"s", []int{3, 4}, randn(r, 12, 1), true}, input{"ll", []int{3, 4}, randn(r, 12, 3), false})
}

func TestEMDR2Errors(t *testing.T) {
	g := G.NewGraph()
	s := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("s"))
	ll := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("ll"))
	ll4 := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("ll4"))
	if _, err := EMDR2(s, ll4); err == nil {
		t.Error("shape mismatch: no error")
	}
	loss, err := EMDR2(s, ll)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := G.Grad(loss, ll); err == nil {
		t.Error("gradient with respect to the reader's log-likelihoods: no error, want none to exist")
	}
	spec, _ := Lookup("emdr2")
	sv := G.NewVector(g, tensor.Float64, G.WithShape(6), G.WithName("sv"))
	if _, err := spec.Build(Inputs{Scores: sv, B: 2, K: 3, Temperature: 0, Teacher: tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float64))}); err == nil {
		t.Error("Temperature 0: no error")
	}
}
