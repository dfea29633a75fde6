package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestCandidateScores: row i holds s(q_i, p_i) then s(q_i, p_{B+iM+k-1}), computed here by hand,
// for dot and cosine; and the gradient of a weighted sum of them matches finite differences.
func TestCandidateScores(t *testing.T) {
	const b, m, h = 3, 2, 4
	r := rand.New(rand.NewPCG(7, 8))
	q, p := randn(r, b*h, 1), randn(r, b*(1+m)*h, 1)
	row := func(x []float64, i int) []float64 { return x[i*h : (i+1)*h] }
	score := func(a, c []float64, cosine bool) float64 {
		var d, na, nc float64
		for j := range a {
			d, na, nc = d+a[j]*c[j], na+a[j]*a[j], nc+c[j]*c[j]
		}
		if cosine {
			return d / (math.Sqrt(na+NormEps) * math.Sqrt(nc+NormEps))
		}
		return d
	}
	for _, sim := range []Similarity{Dot, Cosine} {
		got, shape := evalValue(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) {
			return CandidateScores(in["q"], in["p"], m, sim)
		}, input{"q", []int{b, h}, q, false}, input{"p", []int{b * (1 + m), h}, p, false})
		if len(shape) != 2 || shape[0] != b || shape[1] != 1+m {
			t.Fatalf("%v: shape %v, want [%d %d]", sim, shape, b, 1+m)
		}
		for i := range b {
			for k := range 1 + m {
				c := i
				if k > 0 {
					c = b + i*m + k - 1
				}
				if want := score(row(q, i), row(p, c), sim == Cosine); math.Abs(got[i*(1+m)+k]-want) > 1e-12 {
					t.Errorf("%v: [%d,%d] = %v, want %v", sim, i, k, got[i*(1+m)+k], want)
				}
			}
		}
		w := randn(r, b*(1+m), 3)
		checkFiniteDiff(t, func(in map[string]*G.Node) (*G.Node, error) {
			s, err := CandidateScores(in["q"], in["p"], m, sim)
			if err != nil {
				return nil, err
			}
			ws, err := G.HadamardProd(s, in["w"])
			if err != nil {
				return nil, err
			}
			return G.Sum(ws)
		}, 1e-6, 1e-9, input{"q", []int{b, h}, q, true}, input{"p", []int{b * (1 + m), h}, p, true}, input{"w", []int{b, 1 + m}, w, false})
	}
}
