package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func tinyGPT2Config() EncoderConfig {
	c := tinyReaderConfig()
	c.Causal, c.Arch = true, ArchGPT2
	return c
}

// TestEmbedWordPositionGradients: finite differences of the GPT-2 input embedding.
func TestEmbedWordPositionGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1))
	ids := intDense([]int{3, 0, 3, 1, 2, 3})
	c := gradCase{name: "EmbedWordPosition", leaves: []*tensor.Dense{randDense(r, 4, 5), randDense(r, 4, 5)},
		build: lossOf(func(x []*gorgonia.Node) (*gorgonia.Node, error) {
			in := gorgonia.NewTensor(x[0].Graph(), tensor.Int, 1, gorgonia.WithShape(6), gorgonia.WithValue(ids), gorgonia.WithName("ids"))
			return EmbedWordPosition(x[0], x[1], in, 3)
		})}
	gradCheck(t, c, 64, 1e-6)
}

// TestGPT2BlockGradients checks the gradient of a weighted sum of the GPT-2 tower's token
// states (one pre-LN block and the final LayerNorm, padding, dropout reseeded before every run)
// with respect to every parameter (8 elements each) against central differences, in float64.
func TestGPT2BlockGradients(t *testing.T) {
	cfg := tinyGPT2Config()
	cfg.Layers, cfg.Dropout = 1, 0.1
	rd := &RNG{R: rand.New(rand.NewPCG(1, 1))}
	tw := newTower("gpt", cfg, rand.New(rand.NewPCG(2, 2)), rd, tensor.Float64)
	// Move LayerNorm weights and biases off 1 and 0 so that their gradients are generic.
	pr := rand.New(rand.NewPCG(3, 3))
	for _, p := range tw.Params() {
		if strings.Contains(p.Name, "ln_") || strings.HasSuffix(p.Name, ".bias") {
			for i, d := 0, p.Value.Data().([]float64); i < len(d); i++ {
				d[i] += 0.3 * pr.NormFloat64()
			}
		}
	}
	const B, L = 2, 4
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := newInputs(g, B, L, "x", tensor.Float64)
	if err := in.Let([]int{1, 4, 5, 6, 1, 7, 0, 0}, []float32{1, 1, 1, 1, 1, 1, 0, 0}, nil); err != nil {
		t.Fatal(err)
	}
	x, err := tw.BuildTokens(b, in, true)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := weightedSum(x, 5)
	if err != nil {
		t.Fatal(err)
	}
	var wrt []*gorgonia.Node
	var vals []*tensor.Dense
	var names []string
	for _, bd := range b.Bound() {
		wrt = append(wrt, bd.Node)
		vals = append(vals, bd.Param.Value)
		names = append(names, bd.Param.Name)
	}
	if len(wrt) != 20 {
		t.Fatalf("graph binds %d parameters, want 20 (2 embeddings, 16 of one block, 2 of ln_f)", len(wrt))
	}
	before := func() { rd.R = rand.New(rand.NewPCG(8, 8)) }
	fdCheck(t, "gpt2 block", loss, wrt, vals, names, before, 8, 1e-5)
}

// gpt2Reference computes GPT2LMHeadModel's next-token log-probabilities [L,V] of one sequence
// directly from the formulas (no graph, no custom op): the test's independent account of
// what the reader must compute.
func gpt2Reference(tw *Tower, ids []int) [][]float64 {
	c := tw.Cfg
	H, L, nh := c.Hidden, len(ids), c.Heads
	dh := H / nh
	w := func(name string) []float64 { return tw.byName[name].Value.Data().([]float64) }
	ln := func(x []float64, name string) []float64 {
		g, b := w(name+".weight"), w(name+".bias")
		var mu, v float64
		for _, e := range x {
			mu += e
		}
		mu /= float64(len(x))
		for _, e := range x {
			v += (e - mu) * (e - mu)
		}
		v /= float64(len(x))
		out := make([]float64, len(x))
		for i, e := range x {
			out[i] = (e-mu)/math.Sqrt(v+GPT2LayerNormEps)*g[i] + b[i]
		}
		return out
	}
	lin := func(x []float64, name string) []float64 {
		W, bias := w(name+".weight"), w(name+".bias")
		out := make([]float64, len(bias))
		for o := range out {
			s := bias[o]
			for i, e := range x {
				s += W[o*len(x)+i] * e
			}
			out[o] = s
		}
		return out
	}
	wte, wpe := w("embeddings.word"), w("embeddings.position")
	x := make([][]float64, L)
	for t, id := range ids {
		x[t] = make([]float64, H)
		for j := range x[t] {
			x[t][j] = wte[id*H+j] + wpe[t*H+j]
		}
	}
	for layer := 0; layer < c.Layers; layer++ {
		p := fmt.Sprintf("layer.%d.", layer)
		q, k, v := make([][]float64, L), make([][]float64, L), make([][]float64, L)
		for t := range x {
			h := ln(x[t], p+"ln_1")
			q[t], k[t], v[t] = lin(h, p+"attn.q"), lin(h, p+"attn.k"), lin(h, p+"attn.v")
		}
		next := make([][]float64, L)
		for t := range x {
			ctx := make([]float64, H)
			for hd := 0; hd < nh; hd++ {
				s := make([]float64, t+1) // causal: keys 0..t
				mx := math.Inf(-1)
				for u := 0; u <= t; u++ {
					for j := hd * dh; j < (hd+1)*dh; j++ {
						s[u] += q[t][j] * k[u][j]
					}
					s[u] /= math.Sqrt(float64(dh))
					mx = math.Max(mx, s[u])
				}
				var z float64
				for u := range s {
					s[u] = math.Exp(s[u] - mx)
					z += s[u]
				}
				for u := range s {
					for j := hd * dh; j < (hd+1)*dh; j++ {
						ctx[j] += s[u] / z * v[u][j]
					}
				}
			}
			a := lin(ctx, p+"attn.out")
			for j := range a {
				a[j] += x[t][j]
			}
			f := lin(ln(a, p+"ln_2"), p+"ffn.in")
			for j, e := range f {
				f[j] = 0.5 * e * (1 + math.Erf(e/math.Sqrt2))
			}
			m := lin(f, p+"ffn.out")
			for j := range m {
				m[j] += a[j]
			}
			next[t] = m
		}
		x = next
	}
	out := make([][]float64, L)
	for t := range x {
		h := ln(x[t], "ln_f")
		logits := make([]float64, c.Vocab)
		mx := math.Inf(-1)
		for vi := range logits {
			for j := range h {
				logits[vi] += h[j] * wte[vi*H+j]
			}
			mx = math.Max(mx, logits[vi])
		}
		var z float64
		for _, l := range logits {
			z += math.Exp(l - mx)
		}
		for vi := range logits {
			logits[vi] -= mx + math.Log(z)
		}
		out[t] = logits
	}
	return out
}

// TestReaderIsGPT2: the reader's log-probabilities of every next token equal those of a direct
// GPT2LMHeadModel computation (pre-LN blocks, final LayerNorm, tied head) to 1e-12, with
// LayerNorm parameters and biases moved off their initial values; and the parameter names
// are those of the GPT-2 table.
func TestReaderIsGPT2(t *testing.T) {
	r, err := newReader(tinyReaderConfig(), 7, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	pr := rand.New(rand.NewPCG(4, 4))
	for _, p := range r.Params() {
		if strings.Contains(p.Name, "ln_") || strings.HasSuffix(p.Name, ".bias") {
			for i, d := 0, p.Value.Data().([]float64); i < len(d); i++ {
				d[i] += 0.5 * pr.NormFloat64()
			}
		}
	}
	for _, name := range []string{"reader.embeddings.word", "reader.embeddings.position", "reader.layer.1.ln_1.weight",
		"reader.layer.0.attn.q.weight", "reader.layer.1.ln_2.bias", "reader.layer.0.ffn.out.weight", "reader.ln_f.weight"} {
		if r.Param(name) == nil {
			t.Errorf("reader has no parameter %s", name)
		}
	}
	for _, name := range []string{"reader.embeddings.type", "reader.embeddings.norm.weight", "reader.layer.0.attn.norm.weight"} {
		if r.Param(name) != nil {
			t.Errorf("reader has the BERT parameter %s", name)
		}
	}
	const L = 6
	ids := []int{1, 4, 9, 2, 10, 3}
	pos, tgt := make([]int, 0, L*r.Vocab()), make([]int, 0, L*r.Vocab())
	for p := 0; p < L; p++ {
		for v := 0; v < r.Vocab(); v++ {
			pos, tgt = append(pos, p), append(tgt, v)
		}
	}
	g := gorgonia.NewGraph()
	in, tg := newInputs(g, 1, L, "x", tensor.Float64), NewTargets(g, len(pos), "y")
	logp, err := r.BuildLogProbs(NewBinder(g), in, tg, false)
	if err != nil {
		t.Fatal(err)
	}
	in.Let(ids, []float32{1, 1, 1, 1, 1, 1}, nil)
	tg.Let(pos, tgt)
	runGraph(t, g)
	got := values(logp.Value())
	var want []float64
	for _, row := range gpt2Reference(r.Tower, ids) {
		want = append(want, row...)
	}
	assertClose(t, "log p", got, want, 1e-12)
}

func TestGPT2Config(t *testing.T) {
	c := tinyGPT2Config()
	c.Causal = false
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "causal") {
		t.Errorf("non-causal gpt2: %v", err)
	}
	c = tinyGPT2Config()
	c.Arch = "llama"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `arch = "llama"`) {
		t.Errorf("unknown arch: %v", err)
	}
	c = EncoderConfig{Encoder: EncoderBow, Vocab: 5, Hidden: 4, Arch: ArchGPT2}
	if err := c.Validate(); err == nil {
		t.Error("bow with arch gpt2 accepted")
	}
}
