package losses

import (
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
)

// TestRetrievalLogitsWorked: q = (3, 4), candidates (1, 0) and (0, 2), tau = 0.5. Dot:
// (3, 8) / 0.5 = (6, 16). Cosine: q/|q| = (0.6, 0.8), candidates (1, 0), (0, 1): (1.2, 1.6).
func TestRetrievalLogitsWorked(t *testing.T) {
	for _, c := range []struct {
		sim  Similarity
		want []float64
	}{{Dot, []float64{6, 16}}, {Cosine, []float64{1.2, 1.6}}} {
		for _, dt := range dtypes {
			rtol, atol := tolerances(dt)
			got, shape := evalValue(t, dt, func(in map[string]*G.Node) (*G.Node, error) {
				return RetrievalLogits(in["q"], in["d"], 2, 0.5, c.sim)
			}, input{"q", []int{1, 2}, []float64{3, 4}, false}, input{"d", []int{2, 2}, []float64{1, 0, 0, 2}, false})
			if len(shape) != 2 || shape[0] != 1 || shape[1] != 2 {
				t.Fatalf("shape %v, want (1, 2)", shape)
			}
			assertClose(t, c.sim.String()+"/"+dt.String(), got, c.want, rtol, atol)
		}
	}
}

// TestRetrievalLogitsGradient: RAGSequence over RetrievalLogits, finite differences on q and d,
// B = 2 queries with K = 3 candidates each.
func TestRetrievalLogitsGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	const b, k, h, tt = 2, 3, 4, 2
	rnd := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		return v
	}
	logp := rnd(b * k * tt)
	for i := range logp {
		logp[i] = -logp[i] * logp[i]
	}
	for _, sim := range []Similarity{Dot, Cosine} {
		build := func(in map[string]*G.Node) (*G.Node, error) {
			s, err := RetrievalLogits(in["q"], in["d"], k, 0.7, sim)
			if err != nil {
				return nil, err
			}
			return RAGSequence(s, in["logp"], in["mask"])
		}
		checkFiniteDiff(t, build, 1e-6, 1e-8,
			input{"q", []int{b, h}, rnd(b * h), true},
			input{"d", []int{b * k, h}, rnd(b * k * h), true},
			input{"logp", []int{b, k, tt}, logp, false},
			input{"mask", []int{b, tt}, []float64{1, 1, 1, 0}, false})
	}
}
