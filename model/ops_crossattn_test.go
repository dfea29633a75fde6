package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// runCrossAttention is runAttention for CrossAttention: output and gradients of a weighted sum.
func runCrossAttention(t *testing.T, dt tensor.Dtype, q, k, v, mask *tensor.Dense, o CrossAttentionOptions) attnRunResult {
	t.Helper()
	conv := func(x *tensor.Dense) *tensor.Dense {
		if dt == tensor.Float32 {
			return toFloat32(x)
		}
		return x.Clone().(*tensor.Dense)
	}
	g := gorgonia.NewGraph()
	qn, kn, vn := leafIn(g, "q", conv(q)), leafIn(g, "k", conv(k)), leafIn(g, "v", conv(v))
	a, err := CrossAttention(qn, kn, vn, leafIn(g, "mask", conv(mask)), o)
	if err != nil {
		t.Fatal(err)
	}
	return runAttnGraph(t, a, qn, kn, vn, 1, func(int) {})[0]
}

// TestCrossAttentionHandComputed: one query over two memory rows, H = 1, Scale 1: the weights
// are softmax(1·1, 1·2) = (1/(1+e), e/(1+e)), the output 10/(1+e) + 20e/(1+e) = 17.310585786300;
// with the second row masked, 10.
func TestCrossAttentionHandComputed(t *testing.T) {
	q := tensor.New(tensor.WithShape(1, 1), tensor.WithBacking([]float64{1}))
	k := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{1, 2}))
	v := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]float64{10, 20}))
	o := CrossAttentionOptions{Lq: 1, Lk: 2, Heads: 1, Scale: 1}
	for _, c := range []struct {
		mask []float64
		want float64
	}{{[]float64{1, 1}, 17.310585786300049}, {[]float64{1, 0}, 10}} {
		m := tensor.New(tensor.WithShape(1, 2), tensor.WithBacking(c.mask))
		got := runCrossAttention(t, tensor.Float64, q, k, v, m, o)
		if math.Abs(got.out[0]-c.want) > 1e-12 {
			t.Errorf("mask %v: out %.15g, want %.15g", c.mask, got.out[0], c.want)
		}
		// dv_j = weight_j · (the loss's weight of the output): in the ratio 1 : e, 0 when masked.
		if c.mask[1] == 0 && got.dv[1] != 0 || c.mask[1] == 1 && math.Abs(got.dv[1]/got.dv[0]-math.E) > 1e-12 {
			t.Errorf("mask %v: dv %v, want a ratio of e (0 when masked)", c.mask, got.dv)
		}
	}
}

// TestCrossAttentionMatchesAttention: with Lq = Lk, CrossAttention is Attention without causal
// mask or dropout, bit for bit (outputs and the three gradients), float32 and float64, padded
// sequences included.
func TestCrossAttentionMatchesAttention(t *testing.T) {
	for _, sh := range []struct{ B, L, heads, dh int }{{3, 5, 2, 4}, {2, 40, 2, 16}} {
		r := rand.New(rand.NewPCG(uint64(sh.L), 3))
		H := sh.heads * sh.dh
		q, k, v := randDense(r, sh.B*sh.L, H), randDense(r, sh.B*sh.L, H), randDense(r, sh.B*sh.L, H)
		mask := attnMask(sh.B, sh.L, false)
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			scale := 1 / math.Sqrt(float64(sh.dh))
			got := runCrossAttention(t, dt, q, k, v, mask, CrossAttentionOptions{Lq: sh.L, Lk: sh.L, Heads: sh.heads, Scale: scale})
			want := runAttention(t, dt, q, k, v, mask, AttentionOptions{L: sh.L, Heads: sh.heads, Scale: scale}, true, 1)[0]
			name := fmt.Sprintf("B%d L%d %v", sh.B, sh.L, dt)
			sameBits(t, name+" out", got.out, want.out)
			sameBits(t, name+" dq", got.dq, want.dq)
			sameBits(t, name+" dk", got.dk, want.dk)
			sameBits(t, name+" dv", got.dv, want.dv)
		}
	}
}

// TestCrossAttentionGradients checks dq, dk and dv against central differences with Lq != Lk
// and padded memories.
func TestCrossAttentionGradients(t *testing.T) {
	const B, Lq, Lk, heads, dh = 3, 2, 5, 2, 3
	r := rand.New(rand.NewPCG(2, 11))
	m := tensor.New(tensor.WithShape(B, Lk), tensor.WithBacking([]float64{1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1}))
	gradCheck(t, gradCase{
		name:   "CrossAttention",
		leaves: []*tensor.Dense{randDense(r, B*Lq, heads*dh), randDense(r, B*Lk, heads*dh), randDense(r, B*Lk, heads*dh)},
		build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			return CrossAttention(x[0], x[1], x[2], constNode(x[0], "mask", m), CrossAttentionOptions{Lq: Lq, Lk: Lk, Heads: heads, Scale: 0.7})
		}),
	}, 1000, 1e-6)
}

func TestCrossAttentionShapeErrors(t *testing.T) {
	g := gorgonia.NewGraph()
	r := rand.New(rand.NewPCG(1, 1))
	q, k := leafIn(g, "q", randDense(r, 4, 4)), leafIn(g, "k", randDense(r, 6, 4))
	m := leafIn(g, "m", attnMask(2, 3, false))
	o := CrossAttentionOptions{Lq: 2, Lk: 3, Heads: 2, Scale: 1}
	if _, err := CrossAttention(q, k, k, m, o); err != nil {
		t.Fatalf("good shapes: %v", err)
	}
	for name, c := range map[string]struct {
		q, k *gorgonia.Node
		o    CrossAttentionOptions
	}{
		"k rows":             {q, q, o},
		"Lq does not divide": {q, k, CrossAttentionOptions{Lq: 3, Lk: 3, Heads: 2, Scale: 1}},
		"heads":              {q, k, CrossAttentionOptions{Lq: 2, Lk: 3, Heads: 3, Scale: 1}},
	} {
		if _, err := CrossAttention(c.q, c.k, c.k, m, c.o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
