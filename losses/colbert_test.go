package losses

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// colbertCases returns the cases of one kind from testdata/colbert.json.
func colbertCases(t *testing.T, kind string) []goldenCase {
	t.Helper()
	var out []goldenCase
	for _, c := range loadGoldenFile(t, "testdata/colbert.json") {
		if c["kind"] == kind {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("testdata/colbert.json: no %q case", kind)
	}
	return out
}

// lateInputs reads a case's q, p and token masks as test inputs (q and p differentiated).
func lateInputs(t *testing.T, c goldenCase) []input {
	t.Helper()
	var ins []input
	for _, k := range []string{"q", "p", "q_mask", "p_mask"} {
		v, s := c.array(t, k)
		ins = append(ins, input{k, s, v, k == "q" || k == "p"})
	}
	return ins
}

func lateMode(t *testing.T, c goldenCase) (TokenMasks, Similarity) {
	t.Helper()
	mode, err := ParseTokenMasking(c["masking"].(string))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := ParseSimilarity(c["similarity"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return TokenMasks{Mode: mode}, sim
}

func withMasks(tm TokenMasks, in map[string]*G.Node) TokenMasks {
	tm.Q, tm.P = in["q_mask"], in["p_mask"]
	return tm
}

// TestColBERTContrastiveGolden matches the two PyTorch colbert_contrastive cases (PyLate's
// Contrastive: cosine, masks multiplied, tau 1; and dot, padding excluded, a masked query
// token, tau 0.5): MaxSim scores, loss, grad_q and grad_p, to 1e-6 relative in float64 and
// 1e-4 in float32, called directly and through the losses table.
func TestColBERTContrastiveGolden(t *testing.T) {
	for ci, c := range colbertCases(t, "colbert_contrastive") {
		tm, sim := lateMode(t, c)
		tau := c.num(t, "temperature")
		ins := lateInputs(t, c)
		wantS, _ := c.array(t, "scores")
		for _, dt := range dtypes {
			rtol, atol := tolerances(dt)
			t.Run(fmt.Sprintf("case%d/%v", ci, dt), func(t *testing.T) {
				scores, _ := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					q, p := in["q"], in["p"]
					if sim == Cosine {
						q, _ = normalizeTokens(q)
						p, _ = normalizeTokens(p)
					}
					return MaxSim(q, p, withMasks(tm, in))
				}, ins...)
				assertClose(t, "scores", scores, wantS, rtol, atol)
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return ColBERTContrastive(in["q"], in["p"], withMasks(tm, in), tau, sim)
				}, ins...)
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
			t.Run(fmt.Sprintf("registered/case%d/%v", ci, dt), func(t *testing.T) {
				spec, err := Lookup("colbert_contrastive")
				if err != nil || spec.Batch != LateInteraction || spec.Teacher {
					t.Fatalf("Lookup: %+v, %v", spec, err)
				}
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return spec.Build(Inputs{Q: in["q"], P: in["p"], Temperature: tau, Similarity: sim, TokenMasking: tm.Mode,
						QTokenMask: denseOf(t, c, "q_mask", dt), PTokenMask: denseOf(t, c, "p_mask", dt)})
				}, ins[0], ins[1])
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
		}
	}
}

// TestColBERTKLDistillGolden matches the two PyTorch colbert_kl_distill cases (PyLate's
// Distillation: cosine, masks multiplied, min-max normalised, temperatures 1; and dot, padding
// excluded, no min-max, tau 0.5 and 2): scores of each query's own candidates, loss, grad_q and
// grad_p, directly and through the losses table.
func TestColBERTKLDistillGolden(t *testing.T) {
	for ci, c := range colbertCases(t, "colbert_kl_distill") {
		tm, sim := lateMode(t, c)
		tauS, tauT := c.num(t, "tau_student"), c.num(t, "tau_teacher")
		minMax := c["min_max"].(bool)
		ins := lateInputs(t, c)
		te, ts := c.array(t, "teacher")
		ins = append(ins, input{"teacher", ts, te, false})
		wantS, _ := c.array(t, "scores")
		b, k := ts[0], ts[1]
		for _, dt := range dtypes {
			rtol, atol := tolerances(dt)
			t.Run(fmt.Sprintf("case%d/%v", ci, dt), func(t *testing.T) {
				scores, _ := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					cand := make([][]int, b)
					for i := range cand {
						cand[i] = append(cand[i], i)
						for j := 0; j < k-1; j++ {
							cand[i] = append(cand[i], b+i*(k-1)+j)
						}
					}
					s, _, err := lateScores("test", in["q"], in["p"], withMasks(tm, in), sim, cand)
					return s, err
				}, ins...)
				assertClose(t, "scores", scores, wantS, rtol, atol)
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return ColBERTKLDistill(in["q"], in["p"], withMasks(tm, in), in["teacher"], sim, minMax, tauS, tauT)
				}, ins...)
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
			t.Run(fmt.Sprintf("registered/case%d/%v", ci, dt), func(t *testing.T) {
				spec, err := Lookup("colbert_kl_distill")
				if err != nil || spec.Batch != LateInteraction || !spec.Teacher {
					t.Fatalf("Lookup: %+v, %v", spec, err)
				}
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return spec.Build(Inputs{Q: in["q"], P: in["p"], Temperature: tauS, TeacherTemperature: tauT, Similarity: sim,
						TokenMasking: tm.Mode, NoMinMax: !minMax, Teacher: denseOf(t, c, "teacher", dt),
						QTokenMask: denseOf(t, c, "q_mask", dt), PTokenMask: denseOf(t, c, "p_mask", dt)})
				}, ins[0], ins[1])
				wantLateGolden(t, c, loss, grads, rtol, atol)
			})
		}
	}
}

// wantLateGolden checks a loss and its gradients with respect to q and p against a case.
func wantLateGolden(t *testing.T, c goldenCase, loss float64, grads map[string][]float64, rtol, atol float64) {
	t.Helper()
	wantLoss(t, loss, c.num(t, "loss"), rtol)
	for _, k := range []string{"q", "p"} {
		want, _ := c.array(t, "grad_"+k)
		assertClose(t, "grad_"+k, grads[k], want, rtol, atol)
	}
}

func denseOf(t *testing.T, c goldenCase, key string, dt tensor.Dtype) *tensor.Dense {
	v, s := c.array(t, key)
	return fromFloat64(v, tensor.Shape(s), dt)
}

// TestMaxSimPyLateExample reproduces the worked example of PyLate's colbert_scores docstring
// (1-dimensional tokens, a masked passage token, a masked query token): scores
// [[10 10 1000] [20 20 2000] [0 0 0]] with MaskZero, and the same with MaskExclude (every
// similarity here is >= 0; TestMaxSimMasking shows where the two differ).
func TestMaxSimPyLateExample(t *testing.T) {
	ins := []input{
		{"q", []int{3, 4, 1}, []float64{1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0}, false},
		{"p", []int{3, 3, 1}, []float64{10, 0, 1, 0, 100, 10, 1, 0, 1000}, false},
		{"q_mask", []int{3, 4}, []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}, false},
		{"p_mask", []int{3, 3}, []float64{1, 1, 1, 1, 0, 1, 1, 1, 1}, false},
	}
	for _, mode := range []TokenMasking{MaskZero, MaskExclude} {
		got, shape := evalValue(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return MaxSim(in["q"], in["p"], withMasks(TokenMasks{Mode: mode}, in))
		}, ins...)
		want := []float64{10, 10, 1000, 20, 20, 2000, 0, 0, 0}
		if !tensor.Shape(shape).Eq(tensor.Shape{3, 3}) {
			t.Fatalf("%v: shape %v", mode, shape)
		}
		assertClose(t, mode.String(), got, want, 0, 0)
	}
}

// TestMaxSimMasking: with every similarity negative, MaskZero lets a masked token's 0 win the
// max (PyLate), MaskExclude takes the best unmasked token; a passage with no unmasked token
// scores 0 and passes no gradient.
func TestMaxSimMasking(t *testing.T) {
	ins := []input{
		{"q", []int{1, 1, 1}, []float64{1}, true},
		{"p", []int{2, 3, 1}, []float64{-2, -1, 5, -3, 4, 4}, true},
		{"q_mask", []int{1, 1}, []float64{1}, false},
		{"p_mask", []int{2, 3}, []float64{1, 1, 0, 1, 0, 0}, false},
	}
	for mode, want := range map[TokenMasking][]float64{MaskZero: {0, 0}, MaskExclude: {-1, -3}} {
		got, _ := evalValue(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return MaxSim(in["q"], in["p"], withMasks(TokenMasks{Mode: mode}, in))
		}, ins...)
		assertClose(t, mode.String(), got, want, 0, 0)
	}
	_, grads := mustEval(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
		s, err := MaxSim(in["q"], in["p"], withMasks(TokenMasks{Mode: MaskExclude}, in))
		if err != nil {
			return nil, err
		}
		return G.Sum(s)
	}, ins...)
	assertClose(t, "grad p (exclude)", grads["p"], []float64{0, 1, 0, 1, 0, 0}, 0, 0)
	assertClose(t, "grad q (exclude)", grads["q"], []float64{-4}, 0, 0)
}

// TestMaxSimTie: when two passage tokens attain a query token's max, the gradient goes to the
// first, as torch.max(dim) routes it (gen_colbert_golden.py asserts torch does so).
func TestMaxSimTie(t *testing.T) {
	_, grads := mustEval(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
		s, err := MaxSim(in["q"], in["p"], TokenMasks{})
		if err != nil {
			return nil, err
		}
		return G.Sum(s)
	}, input{"q", []int{1, 1, 2}, []float64{1, 0}, true},
		input{"p", []int{1, 4, 2}, []float64{1, 5, 3, 1, 3, 2, 2, 0}, true})
	assertClose(t, "grad p", grads["p"], []float64{0, 0, 1, 0, 0, 0, 0, 0}, 0, 0)
	assertClose(t, "grad q", grads["q"], []float64{3, 1}, 0, 0)
}

// TestColBERTFiniteDifference compares the analytic gradients of MaxSim, MinMax and both losses
// with central differences on random inputs (no ties), every masking and similarity.
func TestColBERTFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 41))
	const b, m, lq, ld, d = 2, 2, 3, 4, 3
	n := b * (1 + m)
	qm := []float64{1, 1, 0, 1, 1, 1}
	pm := make([]float64, n*ld)
	for i := range pm {
		pm[i] = 1
	}
	pm[3], pm[ld+2], pm[ld+3], pm[5*ld+0] = 0, 0, 0, 0
	mk := func() []input {
		return []input{
			{"q", []int{b, lq, d}, randn(r, b*lq*d, 1), true},
			{"p", []int{n, ld, d}, randn(r, n*ld*d, 1), true},
			{"q_mask", []int{b, lq}, qm, false},
			{"p_mask", []int{n, ld}, pm, false},
			{"teacher", []int{b, 1 + m}, randn(r, b*(1+m), 2), false},
		}
	}
	for _, mode := range []TokenMasking{MaskExclude, MaskZero} {
		for _, sim := range []Similarity{Dot, Cosine} {
			tm := TokenMasks{Mode: mode}
			t.Run(fmt.Sprintf("contrastive/%v/%v", mode, sim), func(t *testing.T) {
				checkFiniteDiff(t, func(in map[string]*G.Node) (*G.Node, error) {
					return ColBERTContrastive(in["q"], in["p"], withMasks(tm, in), 0.3, sim)
				}, 1e-5, 1e-8, mk()...)
			})
			for _, minMax := range []bool{false, true} {
				t.Run(fmt.Sprintf("kl/%v/%v/minmax=%v", mode, sim, minMax), func(t *testing.T) {
					checkFiniteDiff(t, func(in map[string]*G.Node) (*G.Node, error) {
						return ColBERTKLDistill(in["q"], in["p"], withMasks(tm, in), in["teacher"], sim, minMax, 0.7, 1.5)
					}, 1e-5, 1e-8, mk()...)
				})
			}
		}
	}
}

// TestColBERTErrors: bad shapes and mask values give errors naming the input.
func TestColBERTErrors(t *testing.T) {
	q := input{"q", []int{2, 3, 4}, make([]float64, 24), true}
	p := input{"p", []int{3, 2, 4}, make([]float64, 24), true}
	_, _, err := evalGraph(tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
		return ColBERTKLDistill(in["q"], in["p"], TokenMasks{}, nil, Dot, true, 1, 1)
	}, true, q, p)
	if err == nil {
		t.Error("3 passages for 2 queries: no error")
	}
	_, _, err = evalGraph(tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
		return MaxSim(in["q"], in["p"], TokenMasks{P: in["p_mask"]})
	}, false, q, p, input{"p_mask", []int{3, 2}, []float64{1, 1, 0.5, 1, 1, 1}, false})
	if err == nil {
		t.Error("mask value 0.5: no error")
	} else {
		t.Log(err)
	}
	_, _, err = evalGraph(tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
		return MaxSim(in["q"], in["p"], TokenMasks{P: in["p_mask"]})
	}, false, q, p, input{"p_mask", []int{2, 3}, make([]float64, 6), false})
	if err == nil {
		t.Error("mask of shape (2,3) for p (3,2,4): no error")
	}
}

// TestColBERTContrastiveMaskedEqualsRemoval: masking passage j for every query gives the loss
// and gradients of ColBERTContrastive without passage j (no gradient into p_j), directly and
// through the losses table (Inputs.Mask); a mask on one query's candidate changes the loss.
func TestColBERTContrastiveMaskedEqualsRemoval(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b, n, lq, ld, d, drop := 2, 5, 3, 4, 3, 3
	q, p := randn(r, b*lq*d, 1), randn(r, n*ld*d, 1)
	kept := append(slices.Clone(p[:drop*ld*d]), p[(drop+1)*ld*d:]...)
	mask := make([]float64, b*n)
	for i := range b {
		mask[i*n+drop] = math.Inf(-1)
	}
	tm := TokenMasks{Mode: MaskZero}
	for _, sim := range []Similarity{Cosine, Dot} {
		lm, gm := mustEval(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return ColBERTContrastiveMasked(in["q"], in["p"], in["mask"], tm, 0.5, sim)
		}, input{"q", []int{b, lq, d}, q, true}, input{"p", []int{n, ld, d}, p, true}, input{"mask", []int{b, n}, mask, false})
		lr, gr := mustEval(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return ColBERTContrastive(in["q"], in["p"], tm, 0.5, sim)
		}, input{"q", []int{b, lq, d}, q, true}, input{"p", []int{n - 1, ld, d}, kept, true})
		wantLoss(t, lm, lr, 1e-12)
		assertClose(t, "grad q", gm["q"], gr["q"], 1e-10, 1e-14)
		row := ld * d
		assertClose(t, "grad of the masked passage", gm["p"][drop*row:(drop+1)*row], make([]float64, row), 0, 1e-14)
		assertClose(t, "grad p (kept passages)", append(slices.Clone(gm["p"][:drop*row]), gm["p"][(drop+1)*row:]...), gr["p"], 1e-10, 1e-14)

		spec, _ := Lookup("colbert_contrastive")
		lt, _ := mustEval(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return spec.Build(Inputs{Q: in["q"], P: in["p"], Mask: in["mask"], Temperature: 0.5, Similarity: sim, TokenMasking: MaskZero})
		}, input{"q", []int{b, lq, d}, q, false}, input{"p", []int{n, ld, d}, p, false}, input{"mask", []int{b, n}, mask, false})
		wantLoss(t, lt, lr, 1e-12)
		lu, _ := mustEval(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return ColBERTContrastive(in["q"], in["p"], tm, 0.5, sim)
		}, input{"q", []int{b, lq, d}, q, false}, input{"p", []int{n, ld, d}, p, false})
		if math.Abs(lu-lm) < 1e-6 {
			t.Errorf("%v: the mask changed nothing (%v masked, %v unmasked)", sim, lm, lu)
		}
	}
	if _, err := ColBERTContrastiveMasked(nil, nil, nil, tm, 1, Dot); err == nil {
		t.Error("a nil mask is accepted")
	}
}
