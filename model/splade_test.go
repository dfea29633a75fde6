package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// spladeNaive is SpladeMax written out: every logit, then the masked max of log(1+ReLU).
func spladeNaive(h, w, bias, mask []float64, B, L, H, V int) []float64 {
	out := make([]float64, B*V)
	for b := 0; b < B; b++ {
		for v := 0; v < V; v++ {
			best := 0.0
			for l := 0; l < L; l++ {
				if mask[b*L+l] == 0 {
					continue
				}
				x := bias[v]
				for j := 0; j < H; j++ {
					x += h[(b*L+l)*H+j] * w[v*H+j]
				}
				best = math.Max(best, math.Log1p(math.Max(x, 0)))
			}
			out[b*V+v] = best
		}
	}
	return out
}

// TestSpladeMax checks the chunked op against the naive formula over a vocabulary of more than
// one chunk (the last one partial), padding included, and its gradients with respect to the
// tokens, the decoder and the bias by central differences.
func TestSpladeMax(t *testing.T) {
	const B, L, H, V = 2, 3, 4, SpladeChunk + 37
	r := rand.New(rand.NewPCG(1, 2))
	h, w, bias := randDense(r, B*L, H), randDense(r, V, H), randDense(r, V)
	mask := maskDense([][]float64{{1, 1, 0}, {1, 0, 0}})
	got := forward(t, []*tensor.Dense{h, w, bias}, func(x []*gorgonia.Node) (*gorgonia.Node, error) {
		return SpladeMax(x[0], x[1], x[2], constNode(x[0], "mask", mask))
	})
	want := spladeNaive(h.Data().([]float64), w.Data().([]float64), bias.Data().([]float64), mask.Data().([]float64), B, L, H, V)
	assertClose(t, "SpladeMax", got, want, 1e-12)
	zeros := 0
	for _, v := range want {
		if v == 0 {
			zeros++
		}
	}
	if zeros == 0 || zeros == len(want) {
		t.Fatalf("%d of %d weights are 0: the case does not exercise ReLU", zeros, len(want))
	}
	gradCheck(t, gradCase{name: "SpladeMax", leaves: []*tensor.Dense{h, w, bias}, build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
		return SpladeMax(x[0], x[1], x[2], constNode(x[0], "mask", mask))
	})}, 60, 1e-6)
}

// TestSpladeFloat32 runs the float32 op (the assembly sgemm) against the float64 one.
func TestSpladeFloat32(t *testing.T) {
	const B, L, H, V = 3, 5, 16, 2 * SpladeChunk
	r := rand.New(rand.NewPCG(3, 4))
	h, w, bias := randDense(r, B*L, H), randDense(r, V, H), randDense(r, V)
	mask := maskDense([][]float64{{1, 1, 1, 1, 0}, {1, 1, 0, 0, 0}, {1, 1, 1, 1, 1}})
	build := func(m *tensor.Dense) func(x []*gorgonia.Node) (*gorgonia.Node, error) {
		return func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return SpladeMax(x[0], x[1], x[2], constNode(x[0], "mask", m))
		}
	}
	want := forward(t, []*tensor.Dense{h, w, bias}, build(mask))
	got := forward(t, []*tensor.Dense{toFloat32(h), toFloat32(w), toFloat32(bias)}, build(toFloat32(mask)))
	assertClose(t, "SpladeMax float32", got, want, 1e-5)
}

// TestSpladeModel builds a tiny random BERT with the MLM head, checks the identity-initialised
// head and the model's gradients with respect to the head's parameters by central differences.
func TestSpladeModel(t *testing.T) {
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 50, Hidden: 8, Layers: 1, Heads: 2, FFN: 16, MaxPosition: 16}
	m, err := NewBiEncoderOf(cfg, true, 1, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSplade(m.Query, -0.5)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Params()) - len(m.Params()); n != 5 {
		t.Fatalf("head adds %d parameters, want 5", n)
	}
	dw := s.by["mlm.transform.dense.weight"].Value.Data().([]float64)
	if dw[0] != 1 || dw[1] != 0 || dw[9] != 1 {
		t.Fatalf("transform dense not the identity: %v", dw[:10])
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, p := range s.HeadParams() { // away from the initial point, so every term matters
		d := p.Value.Data().([]float64)
		for i := range d {
			d[i] += 0.3 * r.NormFloat64()
		}
	}
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := NewInputsOf(g, 2, 4, "x", tensor.Float64)
	out, err := s.Build(b, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Let([]int{1, 7, 9, 2, 1, 30, 2, 0}, []float32{1, 1, 1, 1, 1, 1, 1, 0}, nil); err != nil {
		t.Fatal(err)
	}
	loss, err := weightedSum(out, 3)
	if err != nil {
		t.Fatal(err)
	}
	var wrt []*gorgonia.Node
	var vals []*tensor.Dense
	var names []string
	for _, bd := range b.Bound() {
		if bd.Param.Name == "encoder.embeddings.word" || s.by[bd.Param.Name] != nil {
			wrt, vals, names = append(wrt, bd.Node), append(vals, bd.Param.Value), append(names, bd.Param.Name)
		}
	}
	if len(wrt) != 6 {
		t.Fatalf("%d parameters to check, want 6 (the head's 5 and the tied word embeddings)", len(wrt))
	}
	fdCheck(t, "Splade", loss, wrt, vals, names, nil, 40, 1e-5)
}
