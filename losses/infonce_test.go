package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func infoNCEBuilder(tau float64, sim Similarity) builder {
	return func(in map[string]*G.Node) (*G.Node, error) { return InfoNCE(in["q"], in["p"], tau, sim) }
}

func infoNCEMaskedBuilder(tau float64, sim Similarity) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		return InfoNCEMasked(in["q"], in["p"], in["mask"], tau, sim)
	}
}

// TestInfoNCEGolden matches the four PyTorch infonce cases (the fourth has 16 queries, one hard
// negative each): loss, grad_q, grad_d_pos and grad_d_neg, to 1e-6 relative in float64 and
// 1e-4 in float32, called directly and (the fourth) through the losses table.
func TestInfoNCEGolden(t *testing.T) {
	cases := goldenCases(t, "infonce")
	if len(cases) != 4 {
		t.Fatalf("%d infonce cases, want 4", len(cases))
	}
	for ci, c := range cases {
		sim, err := ParseSimilarity(c["similarity"].(string))
		if err != nil {
			t.Fatal(err)
		}
		tau := c.num(t, "temperature")
		q, qs := c.array(t, "q")
		pos, ps := c.array(t, "d_pos")
		p := append([]float64(nil), pos...)
		n := ps[0]
		var neg []float64
		if _, ok := c["d_neg"]; ok {
			var ns []int
			neg, ns = c.array(t, "d_neg") // [B, negatives per query, H]
			p = append(p, neg...)
			n += ns[0] * ns[1]
		}
		wantGP, _ := c.array(t, "grad_d_pos")
		wantGP = append(wantGP, func() []float64 {
			if neg == nil {
				return nil
			}
			g, _ := c.array(t, "grad_d_neg")
			return g
		}()...)
		wantGQ, _ := c.array(t, "grad_q")
		for _, dt := range dtypes {
			t.Run(sim.String()+"/"+dt.String()+"/case"+string(rune('0'+ci)), func(t *testing.T) {
				rtol, atol := tolerances(dt)
				loss, grads := mustEval(t, dt, infoNCEBuilder(tau, sim),
					input{"q", qs, q, true},
					input{"p", []int{n, qs[1]}, p, true})
				wantLoss(t, loss, c.num(t, "loss"), rtol)
				assertClose(t, "grad_q", grads["q"], wantGQ, rtol, atol)
				assertClose(t, "grad_d_pos ++ grad_d_neg", grads["p"], wantGP, rtol, atol)
			})
			if qs[0] < 16 {
				continue
			}
			t.Run("registered/"+sim.String()+"/"+dt.String()+"/case"+string(rune('0'+ci)), func(t *testing.T) {
				rtol, atol := tolerances(dt)
				spec, err := Lookup("infonce")
				if err != nil {
					t.Fatal(err)
				}
				loss, grads := mustEval(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
					return spec.Build(Inputs{Q: in["q"], P: in["p"], Temperature: tau, Similarity: sim})
				}, input{"q", qs, q, true}, input{"p", []int{n, qs[1]}, p, true})
				wantLoss(t, loss, c.num(t, "loss"), rtol)
				assertClose(t, "grad_q", grads["q"], wantGQ, rtol, atol)
				assertClose(t, "grad_d_pos ++ grad_d_neg", grads["p"], wantGP, rtol, atol)
			})
		}
	}
}

func randn(r *rand.Rand, n int, scale float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = r.NormFloat64() * scale
	}
	return out
}

func TestInfoNCEFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b, n, h := 3, 5, 4
	for _, sim := range []Similarity{Dot, Cosine} {
		t.Run(sim.String(), func(t *testing.T) {
			checkFiniteDiff(t, infoNCEBuilder(0.5, sim), 1e-5, 1e-8,
				input{"q", []int{b, h}, randn(r, b*h, 1), true},
				input{"p", []int{n, h}, randn(r, n*h, 1), true})
		})
	}
	t.Run("masked", func(t *testing.T) {
		mask := make([]float64, b*n)
		mask[0*n+2] = math.Inf(-1)
		mask[1*n+4] = -1e9
		checkFiniteDiff(t, infoNCEMaskedBuilder(0.5, Cosine), 1e-5, 1e-8,
			input{"q", []int{b, h}, randn(r, b*h, 1), true},
			input{"p", []int{n, h}, randn(r, n*h, 1), true},
			input{"mask", []int{b, n}, mask, false})
	})
}

// TestInfoNCEWorked checks a hand-computed value: B = 1, the positive scores 1 and one
// negative scores 0, tau = 1: L = -log(e/(e+1)) = log(1+e^-1).
func TestInfoNCEWorked(t *testing.T) {
	loss, grads := mustEval(t, tensor.Float64, infoNCEBuilder(1, Dot),
		input{"q", []int{1, 2}, []float64{1, 0}, true},
		input{"p", []int{2, 2}, []float64{1, 0, 0, 1}, true})
	want := math.Log1p(math.Exp(-1))
	wantLoss(t, loss, want, 1e-12)
	// dL/ds_pos = softmax_pos - 1 = -1/(1+e); dL/ds_neg = 1/(1+e); dL/dq = sum_j dL/ds_j p_j.
	pn := 1 / (1 + math.E)
	assertClose(t, "grad q", grads["q"], []float64{-pn, pn}, 1e-12, 1e-15)
	assertClose(t, "grad p", grads["p"], []float64{-pn, 0, pn, 0}, 1e-12, 1e-15)
}

// TestInfoNCEMaskedEqualsRemoval: masking candidate j for every query gives the loss and
// gradients of InfoNCE without candidate j (and no gradient into p_j).
func TestInfoNCEMaskedEqualsRemoval(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b, n, h, drop := 3, 6, 4, 4
	q, p := randn(r, b*h, 1), randn(r, n*h, 1)
	var kept []float64
	for j := 0; j < n; j++ {
		if j != drop {
			kept = append(kept, p[j*h:(j+1)*h]...)
		}
	}
	for _, maskVal := range []float64{math.Inf(-1), -1e30} {
		mask := make([]float64, b*n)
		for i := 0; i < b; i++ {
			mask[i*n+drop] = maskVal
		}
		for _, sim := range []Similarity{Dot, Cosine} {
			lm, gm := mustEval(t, tensor.Float64, infoNCEMaskedBuilder(0.1, sim),
				input{"q", []int{b, h}, q, true},
				input{"p", []int{n, h}, p, true},
				input{"mask", []int{b, n}, mask, false})
			lr, gr := mustEval(t, tensor.Float64, infoNCEBuilder(0.1, sim),
				input{"q", []int{b, h}, q, true},
				input{"p", []int{n - 1, h}, kept, true})
			wantLoss(t, lm, lr, 1e-12)
			assertClose(t, "grad q", gm["q"], gr["q"], 1e-10, 1e-14)
			var gmKept []float64
			for j := 0; j < n; j++ {
				if j != drop {
					gmKept = append(gmKept, gm["p"][j*h:(j+1)*h]...)
				} else {
					assertClose(t, "grad of the masked row", gm["p"][j*h:(j+1)*h], make([]float64, h), 0, 1e-14)
				}
			}
			assertClose(t, "grad p (kept rows)", gmKept, gr["p"], 1e-10, 1e-14)
		}
	}

	// Masking one candidate for one query only changes that query's term: the loss is the mean
	// of per-query InfoNCE terms, and query 1 without candidate 5 is computed by hand.
	mask := make([]float64, b*n)
	mask[1*n+5] = math.Inf(-1)
	lm, _ := mustEval(t, tensor.Float64, infoNCEMaskedBuilder(1, Dot),
		input{"q", []int{b, h}, q, false},
		input{"p", []int{n, h}, p, false},
		input{"mask", []int{b, n}, mask, false})
	want := 0.0
	for i := 0; i < b; i++ {
		var s []float64
		for j := 0; j < n; j++ {
			if i == 1 && j == 5 {
				continue
			}
			dot := 0.0
			for k := 0; k < h; k++ {
				dot += q[i*h+k] * p[j*h+k]
			}
			s = append(s, dot)
		}
		pos := 0.0
		for k := 0; k < h; k++ {
			pos += q[i*h+k] * p[i*h+k]
		}
		want += (lseRow(s) - pos) / float64(b)
	}
	wantLoss(t, lm, want, 1e-12)
}

func TestInfoNCEMaskErrors(t *testing.T) {
	b, n, h := 2, 3, 2
	q := []float64{1, 0, 0, 1}
	p := []float64{1, 0, 0, 1, 1, 1}
	for _, tc := range []struct {
		name string
		at   int
		val  float64
	}{
		{"positive masked", 1*n + 1, math.Inf(-1)},
		{"positive value", 0, 1},
		{"NaN", 2, math.NaN()},
	} {
		mask := make([]float64, b*n)
		mask[tc.at] = tc.val
		_, _, err := evalGraph(tensor.Float64, infoNCEMaskedBuilder(1, Dot), true,
			input{"q", []int{b, h}, q, true},
			input{"p", []int{n, h}, p, true},
			input{"mask", []int{b, n}, mask, false})
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestInfoNCEBuildErrors(t *testing.T) {
	g := G.NewGraph()
	q := G.NewMatrix(g, tensor.Float64, G.WithShape(4, 8), G.WithName("q"))
	p3 := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 8), G.WithName("p3"))
	p7 := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 7), G.WithName("p7"))
	p32 := G.NewMatrix(g, tensor.Float32, G.WithShape(6, 8), G.WithName("p32"))
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(6, 8), G.WithName("p"))
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"fewer passages than queries", func() error { _, err := InfoNCE(q, p3, 0.05, Dot); return err }},
		{"hidden size mismatch", func() error { _, err := InfoNCE(q, p7, 0.05, Dot); return err }},
		{"dtype mismatch", func() error { _, err := InfoNCE(q, p32, 0.05, Dot); return err }},
		{"zero temperature", func() error { _, err := InfoNCE(q, p, 0, Dot); return err }},
		{"unknown similarity", func() error { _, err := InfoNCE(q, p, 1, Similarity(7)); return err }},
		{"mask shape", func() error { _, err := InfoNCEMasked(q, p, p, 1, Dot); return err }},
	} {
		if err := tc.run(); err == nil {
			t.Errorf("%s: no error", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestParseSimilarity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Similarity
		ok   bool
	}{{"dot", Dot, true}, {"Cosine", Cosine, true}, {"cos", Cosine, true}, {"l2", 0, false}, {"", 0, false}} {
		got, err := ParseSimilarity(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSimilarity(%q) = %v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != map[Similarity]string{Dot: "dot", Cosine: "cosine"}[tc.want] {
			t.Errorf("String() = %q", got.String())
		}
	}
}
