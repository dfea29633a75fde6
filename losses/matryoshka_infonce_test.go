package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func matryoshkaBuilder(dims []int, weights []float64, tau float64, sim Similarity) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		if in["mask"] != nil {
			spec, err := Lookup("matryoshka_infonce")
			if err != nil {
				return nil, err
			}
			return spec.Build(Inputs{Q: in["q"], P: in["p"], Mask: in["mask"], Dims: dims, DimWeights: weights, Temperature: tau, Similarity: sim})
		}
		return MatryoshkaInfoNCE(in["q"], in["p"], dims, weights, tau, sim)
	}
}

func matryoshkaRegistered(dims []int, weights []float64, tau float64, sim Similarity) builder {
	return func(in map[string]*G.Node) (*G.Node, error) {
		spec, err := Lookup("matryoshka_infonce")
		if err != nil {
			return nil, err
		}
		return spec.Build(Inputs{Q: in["q"], P: in["p"], Dims: dims, DimWeights: weights, Temperature: tau, Similarity: sim})
	}
}

// TestMatryoshkaInfoNCEGolden matches the PyTorch matryoshka_infonce case (cosine on
// renormalised prefixes, in-batch positives only): loss, grad_q and grad_d_pos, called
// directly and through the losses table.
func TestMatryoshkaInfoNCEGolden(t *testing.T) {
	c := goldenCases(t, "matryoshka_infonce")[0]
	q, qs := c.array(t, "q")
	p, ps := c.array(t, "d_pos")
	gq, _ := c.array(t, "grad_q")
	gp, _ := c.array(t, "grad_d_pos")
	dimsF, _ := c.array(t, "dims")
	weights, _ := c.array(t, "weights")
	dims := make([]int, len(dimsF))
	for i, d := range dimsF {
		dims[i] = int(d)
	}
	tau := c.num(t, "temperature")
	for name, build := range map[string]builder{
		"direct":     matryoshkaBuilder(dims, weights, tau, Cosine),
		"registered": matryoshkaRegistered(dims, weights, tau, Cosine),
	} {
		for _, dt := range dtypes {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				rtol, atol := tolerances(dt)
				loss, grads := mustEval(t, dt, build, input{"q", qs, q, true}, input{"p", ps, p, true})
				wantLoss(t, loss, c.num(t, "loss"), rtol)
				assertClose(t, "grad_q", grads["q"], gq, rtol, atol)
				assertClose(t, "grad_d_pos", grads["p"], gp, rtol, atol)
			})
		}
	}
}

// TestMatryoshkaInfoNCEFiniteDifference covers what the golden case does not: dot similarity,
// hard negatives (N > B), weights other than 1 and a candidate mask.
func TestMatryoshkaInfoNCEFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	b, n, h := 3, 5, 6
	dims, weights := []int{6, 2, 4}, []float64{1, 0.25, 0.5}
	for _, sim := range []Similarity{Dot, Cosine} {
		t.Run(sim.String(), func(t *testing.T) {
			checkFiniteDiff(t, matryoshkaBuilder(dims, weights, 0.5, sim), 1e-5, 1e-8,
				input{"q", []int{b, h}, randn(r, b*h, 1), true},
				input{"p", []int{n, h}, randn(r, n*h, 1), true})
		})
	}
	t.Run("masked", func(t *testing.T) {
		mask := make([]float64, b*n)
		mask[0*n+3] = math.Inf(-1)
		checkFiniteDiff(t, matryoshkaBuilder(dims, weights, 0.5, Cosine), 1e-5, 1e-8,
			input{"q", []int{b, h}, randn(r, b*h, 1), true},
			input{"p", []int{n, h}, randn(r, n*h, 1), true},
			input{"mask", []int{b, n}, mask, false})
	})
}

// TestMatryoshkaInfoNCEIsWeightedInfoNCE: the loss is sum_m w_m InfoNCE on the first m
// columns, each computed separately by InfoNCE; the full dimension alone is InfoNCE; a prefix
// shorter than H sends no gradient to the columns after it.
func TestMatryoshkaInfoNCEIsWeightedInfoNCE(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	b, n, h := 3, 6, 8
	q, p := randn(r, b*h, 1), randn(r, n*h, 1)
	prefix := func(x []float64, rows, m int) []float64 {
		out := make([]float64, 0, rows*m)
		for i := range rows {
			out = append(out, x[i*h:i*h+m]...)
		}
		return out
	}
	for _, sim := range []Similarity{Dot, Cosine} {
		dims, weights := []int{8, 4, 2}, []float64{1, 0.5, 2}
		got, _ := mustEval(t, tensor.Float64, matryoshkaBuilder(dims, weights, 0.1, sim),
			input{"q", []int{b, h}, q, true}, input{"p", []int{n, h}, p, true})
		want := 0.0
		for i, m := range dims {
			l, _ := mustEval(t, tensor.Float64, infoNCEBuilder(0.1, sim),
				input{"q", []int{b, m}, prefix(q, b, m), true}, input{"p", []int{n, m}, prefix(p, n, m), true})
			want += weights[i] * l
		}
		wantLoss(t, got, want, 1e-12)

		full, gFull := mustEval(t, tensor.Float64, matryoshkaBuilder([]int{h}, nil, 0.1, sim),
			input{"q", []int{b, h}, q, true}, input{"p", []int{n, h}, p, true})
		plain, gPlain := mustEval(t, tensor.Float64, infoNCEBuilder(0.1, sim),
			input{"q", []int{b, h}, q, true}, input{"p", []int{n, h}, p, true})
		wantLoss(t, full, plain, 1e-14)
		assertClose(t, "grad q, dims = [H]", gFull["q"], gPlain["q"], 1e-12, 1e-15)

		_, g := mustEval(t, tensor.Float64, matryoshkaBuilder([]int{4, 2}, nil, 0.1, sim),
			input{"q", []int{b, h}, q, true}, input{"p", []int{n, h}, p, true})
		for i := range n {
			assertClose(t, "grad p after the longest prefix", g["p"][i*h+4:(i+1)*h], make([]float64, h-4), 0, 0)
		}
	}
}

func TestMatryoshkaInfoNCEErrors(t *testing.T) {
	g := G.NewGraph()
	q := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("q"))
	p := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 4), G.WithName("p"))
	for _, tc := range []struct {
		name    string
		dims    []int
		weights []float64
		tau     float64
	}{
		{"no dims", nil, nil, 1},
		{"dim 0", []int{4, 0}, nil, 1},
		{"dim > H", []int{5}, nil, 1},
		{"repeated dim", []int{2, 2}, nil, 1},
		{"weights length", []int{4, 2}, []float64{1}, 1},
		{"negative weight", []int{4, 2}, []float64{1, -1}, 1},
		{"NaN weight", []int{4}, []float64{math.NaN()}, 1},
		{"all weights 0", []int{4, 2}, []float64{0, 0}, 1},
		{"temperature", []int{4}, nil, 0},
	} {
		if _, err := MatryoshkaInfoNCE(q, p, tc.dims, tc.weights, tc.tau, Cosine); err == nil {
			t.Errorf("%s: no error", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}
