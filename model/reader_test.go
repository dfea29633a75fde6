package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lmWorked: two states, three tokens. Row 0 = (1, 0), row 1 = (0, 2);
// E rows (1,0), (0,1), (1,1). Logits row 0: (1, 0, 1); row 1: (0, 2, 2).
// log p(tgt 0 | row 0) = 1 - ln(2e + 1); log p(tgt 2 | row 1) = 2 - ln(1 + 2e²).
func TestLMLogProbWorked(t *testing.T) {
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		g := gorgonia.NewGraph()
		x := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 0, 0, 2}))
		e := tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 0, 0, 1, 1, 1}))
		if dt == tensor.Float32 {
			x, e = toFloat32(x), toFloat32(e)
		}
		xn := gorgonia.NewTensor(g, dt, 2, gorgonia.WithShape(2, 2), gorgonia.WithValue(x), gorgonia.WithName("x"))
		en := gorgonia.NewTensor(g, dt, 2, gorgonia.WithShape(3, 2), gorgonia.WithValue(e), gorgonia.WithName("e"))
		pos := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(3), gorgonia.WithValue(intDense([]int{0, -1, 1})), gorgonia.WithName("pos"))
		tgt := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(3), gorgonia.WithValue(intDense([]int{0, 99, 2})), gorgonia.WithName("tgt"))
		out, err := LMLogProb(xn, en, pos, tgt)
		if err != nil {
			t.Fatal(err)
		}
		runGraph(t, g)
		want := []float64{1 - math.Log(2*math.E+1), 0, 2 - math.Log(1+2*math.Exp(2))}
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-6
		}
		assertClose(t, dt.String(), values(out.Value()), want, tol)
	}
}

// TestLMLogProbGradients checks both gradients against central differences,
// with a padding entry, a repeated row and E also used as the input
// embedding (the tied case: Gorgonia sums the two gradients).
func TestLMLogProbGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	const N, H, V = 5, 4, 6
	pos := []int{0, 3, -1, 3, 4, 1}
	tgt := []int{2, 5, 0, 1, 0, 4}
	ids := []int{1, 5, 5, 0, 2}
	gradCheck(t, gradCase{
		name:   "LMLogProb",
		leaves: []*tensor.Dense{randDense(r, N, H), randDense(r, V, H)},
		build: func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			g := x[0].Graph()
			in := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(N), gorgonia.WithValue(intDense(ids)), gorgonia.WithName("ids"))
			emb, err := Gather(x[1], in)
			if err != nil {
				return nil, err
			}
			states, err := Add(x[0], emb)
			if err != nil {
				return nil, err
			}
			p := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(len(pos)), gorgonia.WithValue(intDense(pos)), gorgonia.WithName("pos"))
			tg := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(len(tgt)), gorgonia.WithValue(intDense(tgt)), gorgonia.WithName("tgt"))
			out, err := LMLogProb(states, x[1], p, tg)
			if err != nil {
				return nil, err
			}
			return weightedSum(out, 3)
		},
	}, 100, 1e-6)
}

func TestLMLogProbErrors(t *testing.T) {
	cases := []struct {
		pos, tgt []int
		want     string
	}{
		{[]int{0, 2}, []int{0, 0}, "pos[1] = 2 is out of range [-1,2)"},
		{[]int{0, -2}, []int{0, 0}, "pos[1] = -2 is out of range"},
		{[]int{1, 0}, []int{3, 0}, "tgt[0] = 3 is out of range [0,3)"},
	}
	for _, c := range cases {
		g := gorgonia.NewGraph()
		x := gorgonia.NewTensor(g, tensor.Float64, 2, gorgonia.WithShape(2, 2), gorgonia.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.Of(tensor.Float64))), gorgonia.WithName("x"))
		e := gorgonia.NewTensor(g, tensor.Float64, 2, gorgonia.WithShape(3, 2), gorgonia.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.Of(tensor.Float64))), gorgonia.WithName("e"))
		p := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(2), gorgonia.WithValue(intDense(c.pos)), gorgonia.WithName("pos"))
		tg := gorgonia.NewTensor(g, tensor.Int, 1, gorgonia.WithShape(2), gorgonia.WithValue(intDense(c.tgt)), gorgonia.WithName("tgt"))
		if _, err := LMLogProb(x, e, p, tg); err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(g)
		err := vm.RunAll()
		vm.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pos %v tgt %v: error %v, want %q", c.pos, c.tgt, err, c.want)
		}
	}
}

func tinyReaderConfig() EncoderConfig {
	return EncoderConfig{Encoder: EncoderTransformer, Vocab: 11, Hidden: 8, Layers: 2, Heads: 2, FFN: 12, MaxPosition: 8}
}

// readerGraph is a reader's training graph: B x L inputs, M targets, the
// summed log-probabilities as a scalar.
type readerGraph struct {
	in    *Inputs
	tg    *Targets
	logp  *gorgonia.Node
	total *gorgonia.Node
	b     *Binder
}

func newReaderGraph(t *testing.T, r *Reader, B, L, M int, train bool) *readerGraph {
	t.Helper()
	g := gorgonia.NewGraph()
	rg := &readerGraph{b: NewBinder(g), in: newInputs(g, B, L, "x", r.Tower.dt), tg: NewTargets(g, M, "y")}
	var err error
	if rg.logp, err = r.BuildLogProbs(rg.b, rg.in, rg.tg, train); err != nil {
		t.Fatal(err)
	}
	if rg.total, err = weightedSum(rg.logp, 4); err != nil {
		t.Fatal(err)
	}
	return rg
}

// TestReaderGradients checks the gradient of a weighted sum of next-token
// log-probabilities with respect to every reader parameter (6 elements
// each), float64, with padding and dropout.
func TestReaderGradients(t *testing.T) {
	cfg := tinyReaderConfig()
	cfg.Dropout = 0.1
	r, err := newReader(cfg, 3, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	const B, L = 2, 5
	rg := newReaderGraph(t, r, B, L, 6, true)
	ids := []int{2, 3, 4, 5, 0, 2, 6, 7, 0, 0}
	mask := []float32{1, 1, 1, 1, 0, 1, 1, 1, 0, 0}
	if err := rg.in.Let(ids, mask, nil); err != nil {
		t.Fatal(err)
	}
	// Next-token targets of every real position but the last, plus one unused entry.
	if err := rg.tg.Let([]int{0, 1, 2, 5, 6, -1}, []int{3, 4, 5, 6, 7, 0}); err != nil {
		t.Fatal(err)
	}
	var wrt []*gorgonia.Node
	var vals []*tensor.Dense
	var names []string
	for _, bd := range rg.b.Bound() {
		wrt = append(wrt, bd.Node)
		vals = append(vals, bd.Param.Value)
		names = append(names, bd.Param.Name)
	}
	if len(wrt) != len(r.Params()) {
		t.Fatalf("graph binds %d parameters, reader has %d", len(wrt), len(r.Params()))
	}
	before := func() { r.SetRNG(rand.New(rand.NewPCG(8, 8))) }
	fdCheck(t, "reader", rg.total, wrt, vals, names, before, 6, 1e-5)
}

// TestReaderCausal: the log-probability of a token depends on the tokens
// before it only, so changing a later token leaves earlier scores as they
// were, and changing an earlier one moves them.
func TestReaderCausal(t *testing.T) {
	r, err := newReader(tinyReaderConfig(), 5, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	const L = 6
	score := func(ids []int) []float64 {
		rg := newReaderGraph(t, r, 1, L, 3, false)
		rg.in.Let(ids, []float32{1, 1, 1, 1, 1, 1}, nil)
		rg.tg.Let([]int{0, 1, 2}, ids[1:4])
		runGraph(t, rg.logp.Graph())
		return values(rg.logp.Value())
	}
	base := score([]int{2, 3, 4, 5, 6, 7})
	later := score([]int{2, 3, 4, 5, 9, 1})
	assertClose(t, "tokens 4,5 changed", later, base, 1e-12)
	earlier := score([]int{2, 8, 4, 5, 6, 7})
	if close64(earlier[1], base[1], 1e-9) {
		t.Errorf("changing token 1 left log p(token 2) at %g", base[1])
	}
}

// TestReaderLearnsAndDecodes trains a tiny reader (float32, plain SGD on the
// tape's gradients) to continue 2 -> 5 6 7 stop(1) and 3 -> 8 stop, then
// decodes both greedily and checks the tokens, that LogProb equals the
// training graph's score of the same continuation, and the confidence.
func TestReaderLearnsAndDecodes(t *testing.T) {
	cfg := tinyReaderConfig()
	r, err := NewReader(cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	const B, L, stop = 2, 6, 1
	ids := []int{2, 5, 6, 7, 1, 0, 3, 8, 1, 0, 0, 0}
	mask := []float32{1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0}
	pos := []int{0, 1, 2, 3, 6, 7}
	tgt := []int{5, 6, 7, 1, 8, 1}
	rg := newReaderGraph(t, r, B, L, len(pos), false)
	rg.in.Let(ids, mask, nil)
	rg.tg.Let(pos, tgt)
	sum, err := gorgonia.Sum(rg.logp)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := gorgonia.Neg(sum)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, rg.b.Nodes()...); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(loss.Graph(), gorgonia.BindDualValues(rg.b.Nodes()...))
	defer vm.Close()
	var first, last float64
	for step := 0; step < 150; step++ {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		last = float64(loss.Value().Data().(float32))
		if step == 0 {
			first = last
		}
		for _, bd := range rg.b.Bound() {
			gv, _ := bd.Node.Grad()
			g := gv.Data().([]float32)
			w := bd.Param.Value.Data().([]float32)
			for i := range w {
				w[i] -= 0.05 * g[i]
				g[i] = 0
			}
		}
	}
	if !(last < 0.1*first) {
		t.Fatalf("loss %g -> %g, want a tenfold drop", first, last)
	}
	rr, err := NewReaderRunner(r, 1, L) // B = 1: two chunks
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	gens, err := rr.Greedy([][]int{{2}, {3}}, 5, stop)
	if err != nil {
		t.Fatal(err)
	}
	wantTok := [][]int{{5, 6, 7}, {8}}
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	lp := values(rg.logp.Value())
	wantLP := []float64{lp[0] + lp[1] + lp[2] + lp[3], lp[4] + lp[5]}
	for i, g := range gens {
		if !slicesEqual(g.Tokens, wantTok[i]) || !g.Stopped {
			t.Errorf("prompt %d: decoded %v (stopped %t), want %v then stop", i, g.Tokens, g.Stopped, wantTok[i])
		}
		if !close64(g.LogProb, wantLP[i], 1e-5) {
			t.Errorf("prompt %d: LogProb %g, graph says %g", i, g.LogProb, wantLP[i])
		}
		if c := g.Confidence(); !(c > 0.5 && c <= 1) {
			t.Errorf("prompt %d: confidence %g after training", i, c)
		}
	}
	// maxNew = 2 stops the first prompt before its stop token.
	gens, err = rr.Greedy([][]int{{2}}, 2, stop)
	if err != nil || gens[0].Stopped || !slicesEqual(gens[0].Tokens, []int{5, 6}) {
		t.Errorf("maxNew 2: %+v, %v", gens, err)
	}
	if _, err := rr.Greedy([][]int{{}}, 2, stop); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := rr.Greedy([][]int{{2}}, 2, 11); err == nil {
		t.Error("stop id 11 >= V accepted")
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNewReader(t *testing.T) {
	r, err := NewReader(tinyReaderConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Cfg.Causal || r.Vocab() != 11 {
		t.Errorf("cfg %+v", r.Cfg)
	}
	if p := r.Param("reader.embeddings.word"); p == nil || !p.Value.Shape().Eq(tensor.Shape{11, 8}) {
		t.Errorf("reader.embeddings.word = %v", p)
	}
	if len(r.Params()) != 36 {
		t.Errorf("%d params, want 36 (a 2-layer GPT-2 tower)", len(r.Params()))
	}
	bow := tinyReaderConfig()
	bow.Encoder = EncoderBow
	if _, err := NewReader(bow, 1); err == nil || !strings.Contains(err.Error(), `encoder = "bow"`) {
		t.Errorf("bow reader: %v", err)
	}
}

// TestReaderAttentionProbs: BuildLogProbsAttention gives BuildLogProbs' bits (float32, with
// padding) and per layer [B,heads,L,L] probabilities, causal (nothing above the diagonal),
// nothing on padding, each real row summing to 1.
func TestReaderAttentionProbs(t *testing.T) {
	r, err := NewReader(tinyReaderConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	const B, L = 2, 6
	ids := []int{2, 3, 4, 5, 6, 7, 2, 8, 4, 0, 0, 0}
	mask := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}
	pos, tgt := []int{0, 1, 2, 6, 7}, []int{3, 4, 5, 8, 4}
	run := func(withProbs bool) ([]float32, [][]float32) {
		g := gorgonia.NewGraph()
		b := NewBinder(g)
		in, tg := NewInputs(g, B, L, "x"), NewTargets(g, len(pos), "y")
		var lp *gorgonia.Node
		var probs []*gorgonia.Node
		var err error
		if withProbs {
			lp, probs, err = r.BuildLogProbsAttention(b, in, tg)
		} else {
			lp, err = r.BuildLogProbs(b, in, tg, false)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Let(ids, mask, nil); err != nil {
			t.Fatal(err)
		}
		if err := tg.Let(pos, tgt); err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		var ps [][]float32
		for _, p := range probs {
			if !p.Shape().Eq(tensor.Shape{B, 2, L, L}) {
				t.Fatalf("attention probabilities of shape %v, want (%d, 2, %d, %d)", p.Shape(), B, L, L)
			}
			ps = append(ps, append([]float32(nil), p.Value().Data().([]float32)...))
		}
		return append([]float32(nil), lp.Value().Data().([]float32)...), ps
	}
	want, _ := run(false)
	got, probs := run(true)
	if !slices.Equal(got, want) {
		t.Errorf("log-probabilities %v, BuildLogProbs %v", got, want)
	}
	if len(probs) != 2 {
		t.Fatalf("%d layers of probabilities, want 2", len(probs))
	}
	for l, p := range probs {
		for bh := range B * 2 {
			for i := range L {
				real := mask[(bh/2)*L+i] == 1
				var sum float64
				for j := range L {
					w := p[(bh*L+i)*L+j]
					if w != 0 && (j > i || mask[(bh/2)*L+j] == 0) {
						t.Errorf("layer %d block %d: p[%d][%d] = %g, want 0 (causal, padding)", l, bh, i, j, w)
					}
					sum += float64(w)
				}
				if real && math.Abs(sum-1) > 1e-5 {
					t.Errorf("layer %d block %d row %d sums to %g", l, bh, i, sum)
				}
			}
		}
	}
}
