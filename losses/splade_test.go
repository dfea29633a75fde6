package losses

import (
	"fmt"
	"math"
	"testing"

	G "gorgonia.org/gorgonia"
)

// spladeInputs reads a splade case's q, p (differentiated) and its mask (-1 marks a removed
// candidate: -Inf in the additive mask).
func spladeInputs(t *testing.T, c goldenCase) []input {
	t.Helper()
	q, qs := c.array(t, "q")
	p, ps := c.array(t, "p")
	m, ms := c.array(t, "mask")
	for i, v := range m {
		if v < 0 {
			m[i] = math.Inf(-1)
		}
	}
	return []input{{"q", qs, q, true}, {"p", ps, p, true}, {"mask", ms, m, false}}
}

// TestSpladeGolden matches the two PyTorch cases of testdata/splade.json (tools/golden/
// gen_splade_golden.py: sentence-transformers' SpladeLoss written out; the second with a masked
// candidate and tau 0.5): the FLOPS terms, the loss, grad_q and grad_p, to 1e-6 relative in
// float64 and 1e-4 in float32, directly and through the losses table.
func TestSpladeGolden(t *testing.T) {
	for ci, c := range loadGoldenFile(t, "testdata/splade.json") {
		ins := spladeInputs(t, c)
		tau := c.num(t, "temperature")
		w := FlopsWeights{Query: c.num(t, "lambda_q"), Passage: c.num(t, "lambda_d")}
		for _, dt := range dtypes {
			rtol, atol := tolerances(dt)
			t.Run(fmt.Sprintf("case%d/%v", ci, dt), func(t *testing.T) {
				one := 1.0
				fq, _ := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) { return FLOPS(in["q"], &one) }, ins[0])
				wantLoss(t, fq, c.num(t, "flops_q"), rtol)
				fd, _ := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) { return FLOPS(in["p"], &one) }, ins[1])
				wantLoss(t, fd, c.num(t, "flops_d"), rtol)
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return SpladeLoss(in["q"], in["p"], in["mask"], tau, &w)
				}, ins...)
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
			t.Run(fmt.Sprintf("registered/case%d/%v", ci, dt), func(t *testing.T) {
				spec, err := Lookup("splade")
				if err != nil || spec.Batch != Contrastive || spec.Teacher {
					t.Fatalf("Lookup: %+v, %v", spec, err)
				}
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return spec.Build(Inputs{Q: in["q"], P: in["p"], Mask: in["mask"], Temperature: tau, Similarity: Dot, Flops: &w})
				}, ins...)
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
		}
	}
}

// TestSpladeFiniteDiff checks the loss's gradients by central differences at other weights,
// and that a weight changed between runs of one graph is read (the warm-up's way).
func TestSpladeFiniteDiff(t *testing.T) {
	c := loadGoldenFile(t, "testdata/splade.json")[1]
	ins := spladeInputs(t, c)
	w := FlopsWeights{Query: 0.7, Passage: 0.2}
	build := func(in map[string]*G.Node) (*G.Node, error) { return SpladeLoss(in["q"], in["p"], in["mask"], 0.5, &w) }
	checkFiniteDiff(t, build, 1e-6, 1e-8, ins...)
	spec, _ := Lookup("splade")
	if _, err := spec.Build(Inputs{Similarity: Cosine}); err == nil {
		t.Fatal("splade with cosine similarity accepted")
	}
}

// TestFlopsWarmup checks the quadratic schedule: 0 at step 0, a quarter at half the warm-up,
// lambda from the warm-up's end.
func TestFlopsWarmup(t *testing.T) {
	for _, c := range []struct {
		step, warm int
		want       float64
	}{{0, 10, 0}, {5, 10, 0.25}, {10, 10, 1}, {50, 10, 1}, {3, 0, 1}} {
		if got := FlopsWarmup(1, c.step, c.warm); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("FlopsWarmup(1, %d, %d) = %g, want %g", c.step, c.warm, got, c.want)
		}
	}
}
