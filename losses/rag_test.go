package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func ragBuilder(f func(s, logp, mask *G.Node) (*G.Node, error)) builder {
	return func(in map[string]*G.Node) (*G.Node, error) { return f(in["s"], in["logp"], in["mask"]) }
}

func ragFullBuilder(in map[string]*G.Node) (*G.Node, error) {
	return RAGSequenceFull(in["s"], in["logZ"], in["logp"], in["mask"])
}

// ragInputsOf returns the three inputs of a RAG loss; s and logp are differentiated.
func ragInputsOf(b, k, t int, s, logp, mask []float64) []input {
	return []input{
		{"s", []int{b, k}, s, true},
		{"logp", []int{b, k, t}, logp, true},
		{"mask", []int{b, t}, mask, false},
	}
}

// TestRAGGolden matches the PyTorch rag case: both losses, their gradients on the retrieval
// logits and on the token log-probabilities, and the RAG-Sequence posterior gamma.
func TestRAGGolden(t *testing.T) {
	c := goldenCases(t, "rag")[0]
	s, ss := c.array(t, "retrieval_logits")
	logp, ls := c.array(t, "target_logprobs")
	mask, _ := c.array(t, "mask")
	b, k, tt := ls[0], ls[1], ls[2]
	if ss[0] != b || ss[1] != k {
		t.Fatalf("golden shapes %v %v", ss, ls)
	}
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		for _, tc := range []struct {
			name string
			f    func(s, logp, mask *G.Node) (*G.Node, error)
		}{{"rag_sequence", RAGSequence}, {"rag_token", RAGToken}} {
			t.Run(tc.name+"/"+dt.String(), func(t *testing.T) {
				loss, grads := mustEval(t, dt, ragBuilder(tc.f), ragInputsOf(b, k, tt, s, logp, mask)...)
				wantLoss(t, loss, c.num(t, tc.name+"_loss"), rtol)
				gs, _ := c.array(t, tc.name+"_grad_logits")
				gl, _ := c.array(t, tc.name+"_grad_logprobs")
				assertClose(t, tc.name+"_grad_logits", grads["s"], gs, rtol, atol)
				assertClose(t, tc.name+"_grad_logprobs", grads["logp"], gl, rtol, atol)
			})
		}
		t.Run("posterior/"+dt.String(), func(t *testing.T) {
			gamma, shape := evalValue(t, dt, ragBuilder(RAGPosterior), ragInputsOf(b, k, tt, s, logp, mask)...)
			want, ws := c.array(t, "rag_sequence_posterior_gamma")
			if !tensor.Shape(shape).Eq(tensor.Shape(ws)) {
				t.Fatalf("gamma shape %v, want %v", shape, ws)
			}
			assertClose(t, "rag_sequence_posterior_gamma", gamma, want, rtol, atol)
		})
	}
}

// TestRAGWorked is the worked example: candidate weights (0.6, 0.4), per-token probabilities
// (0.9, 0.2) under z_1 and (0.1, 0.8) under z_2.
//
//	p_seq   = 0.6*0.9*0.2 + 0.4*0.1*0.8 = 0.108 + 0.032 = 0.14
//	p_token = (0.6*0.9 + 0.4*0.1) * (0.6*0.2 + 0.4*0.8) = 0.58 * 0.44 = 0.2552
//	gamma_1 = 0.108/0.14 = 27/35, dL_seq/ds_1 = 0.6 - 27/35 = -0.1714...
func TestRAGWorked(t *testing.T) {
	s := []float64{math.Log(0.6), math.Log(0.4)}
	logp := []float64{math.Log(0.9), math.Log(0.2), math.Log(0.1), math.Log(0.8)}
	mask := []float64{1, 1}
	ins := ragInputsOf(1, 2, 2, s, logp, mask)
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, ragBuilder(RAGSequence), ins...)
		wantLoss(t, loss, -math.Log(0.14), rtol)
		assertClose(t, "dL_seq/ds", grads["s"], []float64{0.6 - 27.0/35, -(0.6 - 27.0/35)}, rtol, atol)
		if g := grads["s"][0]; math.Abs(g-(-0.1714)) > 1e-4 {
			t.Errorf("dL_seq/ds_1 = %.6f, want -0.1714", g)
		}
		gamma, _ := evalValue(t, dt, ragBuilder(RAGPosterior), ins...)
		assertClose(t, "gamma", gamma, []float64{27.0 / 35, 8.0 / 35}, rtol, atol)

		loss, _ = mustEval(t, dt, ragBuilder(RAGToken), ins...)
		wantLoss(t, loss, -math.Log(0.2552), rtol)
	}
}

// randRAG draws retrieval logits, token log-probabilities (of a softmax over a vocabulary of
// 5, so they are real log-probabilities) and a mask with 1..T real tokens per example.
func randRAG(r *rand.Rand, b, k, t int) (s, logp, mask []float64) {
	s = randn(r, b*k, 1.5)
	logp = make([]float64, b*k*t)
	for i := range logp {
		logits := randn(r, 5, 2)
		logp[i] = logits[0] - lseRow(logits)
	}
	mask = make([]float64, b*t)
	for i := 0; i < b; i++ {
		n := 1 + r.IntN(t)
		for j := 0; j < n; j++ {
			mask[i*t+j] = 1
		}
	}
	return s, logp, mask
}

// TestRAGSequenceGradientIsPriorMinusPosterior: on random inputs the RAG-Sequence gradient on
// s_b equals (p_b - gamma_b)/B, with gamma computed here in plain Go from probabilities
// (gamma_k = p_k a_k / sum_j p_j a_j, a_k = prod_t p_theta) and also by RAGPosterior.
func TestRAGSequenceGradientIsPriorMinusPosterior(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	b, k, tt := 4, 3, 5
	for trial := 0; trial < 5; trial++ {
		s, logp, mask := randRAG(r, b, k, tt)
		ins := ragInputsOf(b, k, tt, s, logp, mask)
		_, grads := mustEval(t, tensor.Float64, ragBuilder(RAGSequence), ins...)
		post, _ := evalValue(t, tensor.Float64, ragBuilder(RAGPosterior), ins...)
		want := make([]float64, b*k)
		gamma := make([]float64, b*k)
		for i := 0; i < b; i++ {
			z := 0.0
			for c := 0; c < k; c++ {
				z += math.Exp(s[i*k+c])
			}
			norm := 0.0
			for c := 0; c < k; c++ {
				a := 1.0
				for j := 0; j < tt; j++ {
					if mask[i*tt+j] == 1 {
						a *= math.Exp(logp[(i*k+c)*tt+j])
					}
				}
				gamma[i*k+c] = math.Exp(s[i*k+c]) / z * a
				norm += gamma[i*k+c]
			}
			for c := 0; c < k; c++ {
				gamma[i*k+c] /= norm
				want[i*k+c] = (math.Exp(s[i*k+c])/z - gamma[i*k+c]) / float64(b)
			}
		}
		assertClose(t, "dL/ds", grads["s"], want, 1e-9, 1e-14)
		assertClose(t, "RAGPosterior", post, gamma, 1e-9, 1e-14)
	}
}

func TestRAGFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	b, k, tt := 2, 3, 4
	s, logp, mask := randRAG(r, b, k, tt)
	mask[tt-1] = 0 // example 0 has padding at the end
	for name, f := range map[string]func(s, logp, mask *G.Node) (*G.Node, error){
		"sequence": RAGSequence, "token": RAGToken,
	} {
		t.Run(name, func(t *testing.T) {
			checkFiniteDiff(t, ragBuilder(f), 1e-5, 1e-9, ragInputsOf(b, k, tt, s, logp, mask)...)
		})
	}
	t.Run("full", func(t *testing.T) {
		logZ := []float64{lseRow(s[:k]) + 2, lseRow(s[k:]) + 0.5}
		checkFiniteDiff(t, ragFullBuilder, 1e-5, 1e-9,
			append(ragInputsOf(b, k, tt, s, logp, mask), input{"logZ", []int{b}, logZ, false})...)
	})
}

// TestRAGPaddingIgnored: values at padded positions (even -Inf) change neither the losses nor
// the gradients, and padded positions get zero gradient.
func TestRAGPaddingIgnored(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	b, k, tt := 2, 3, 4
	s, logp, _ := randRAG(r, b, k, tt)
	mask := []float64{1, 1, 0, 0, 1, 1, 1, 0}
	junk := append([]float64(nil), logp...)
	for i := 0; i < b; i++ {
		for c := 0; c < k; c++ {
			for j := 0; j < tt; j++ {
				if mask[i*tt+j] == 0 {
					junk[(i*k+c)*tt+j] = math.Inf(-1)
				}
			}
		}
	}
	for name, f := range map[string]func(s, logp, mask *G.Node) (*G.Node, error){
		"sequence": RAGSequence, "token": RAGToken,
	} {
		l1, g1 := mustEval(t, tensor.Float64, ragBuilder(f), ragInputsOf(b, k, tt, s, logp, mask)...)
		l2, g2 := mustEval(t, tensor.Float64, ragBuilder(f), ragInputsOf(b, k, tt, s, junk, mask)...)
		if l1 != l2 || math.IsNaN(l2) {
			t.Errorf("%s: loss %g with finite padding, %g with -Inf padding", name, l1, l2)
		}
		assertClose(t, name+" grad s", g2["s"], g1["s"], 0, 0)
		assertClose(t, name+" grad logp", g2["logp"], g1["logp"], 0, 0)
		for i, m := range mask {
			for c := 0; c < k; c++ {
				if at := (i/tt*k+c)*tt + i%tt; m == 0 && g1["logp"][at] != 0 {
					t.Errorf("%s: gradient %g at padded position %d", name, g1["logp"][at], at)
				}
			}
		}
	}
}

// TestRAGLongTargetNoUnderflow: 2000 tokens of probability e^-1 under every passage give
// p(y|x) = e^-2000, far below the smallest float64; the log-space loss is exactly 2000 and the
// posterior is the prior.
func TestRAGLongTargetNoUnderflow(t *testing.T) {
	b, k, tt := 1, 2, 2000
	logp := make([]float64, b*k*tt)
	mask := make([]float64, b*tt)
	for i := range logp {
		logp[i] = -1
	}
	for i := range mask {
		mask[i] = 1
	}
	s := []float64{0.3, -0.2}
	for name, f := range map[string]func(s, logp, mask *G.Node) (*G.Node, error){
		"sequence": RAGSequence, "token": RAGToken,
	} {
		for _, dt := range dtypes {
			loss, grads := mustEval(t, dt, ragBuilder(f), ragInputsOf(b, k, tt, s, logp, mask)...)
			wantLoss(t, loss, 2000, 1e-6)
			// The true gradient is 0; float32 keeps the cancellation of 2000 token terms of
			// size ~1 to a few 1e-6 because the sums over tokens run in float64.
			atol := 1e-10
			if dt == tensor.Float32 {
				atol = 1e-5
			}
			assertClose(t, name+" grad s", grads["s"], []float64{0, 0}, 0, atol)
		}
	}
}

// TestRAGSequenceFull: with logZ equal to the candidates' own log-sum-exp it is RAGSequence;
// every extra nat of corpus mass adds one nat of loss; the gradient on s is -gamma/B.
func TestRAGSequenceFull(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	b, k, tt := 3, 4, 3
	s, logp, mask := randRAG(r, b, k, tt)
	ins := ragInputsOf(b, k, tt, s, logp, mask)
	own := make([]float64, b)
	for i := range own {
		own[i] = lseRow(s[i*k : (i+1)*k])
	}
	seq, _ := mustEval(t, tensor.Float64, ragBuilder(RAGSequence), ins...)
	full, _ := mustEval(t, tensor.Float64, ragFullBuilder, append(ins, input{"logZ", []int{b}, own, false})...)
	wantLoss(t, full, seq, 1e-12)

	bigger := []float64{own[0] + 3, own[1] + 1, own[2] + 2}
	full, grads := mustEval(t, tensor.Float64, ragFullBuilder, append(ins, input{"logZ", []int{b}, bigger, false})...)
	wantLoss(t, full, seq+2, 1e-12)
	gamma, _ := evalValue(t, tensor.Float64, ragBuilder(RAGPosterior), ins...)
	want := make([]float64, len(gamma))
	for i, g := range gamma {
		want[i] = -g / float64(b)
	}
	assertClose(t, "dL/ds", grads["s"], want, 1e-9, 1e-14)

	small := []float64{own[0], own[1] - 0.1, own[2]}
	if _, _, err := evalGraph(tensor.Float64, ragFullBuilder, true, append(ins, input{"logZ", []int{b}, small, false})...); err == nil {
		t.Error("logZ below the candidates' log-sum-exp: no error")
	} else {
		t.Log(err)
	}
}

func TestRAGInputErrors(t *testing.T) {
	s := []float64{0, 0}
	logp := []float64{-1, -1, -1, -1}
	_, _, err := evalGraph(tensor.Float64, ragBuilder(RAGToken), true, ragInputsOf(1, 2, 2, s, logp, []float64{1, 0.5})...)
	if err == nil {
		t.Error("mask value 0.5: no error")
	} else {
		t.Log(err)
	}
	g := G.NewGraph()
	sn := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("s"))
	lp := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 4, 5), G.WithName("logp"))
	m := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 5), G.WithName("mask"))
	if _, err := RAGSequence(sn, lp, m); err == nil {
		t.Error("logp with K=4 for s with K=3: no error")
	} else {
		t.Log(err)
	}
	lp3 := G.NewTensor(g, tensor.Float64, 3, G.WithShape(2, 3, 5), G.WithName("logp3"))
	m4 := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 4), G.WithName("mask4"))
	if _, err := RAGToken(sn, lp3, m4); err == nil {
		t.Error("mask with T=4 for logp with T=5: no error")
	} else {
		t.Log(err)
	}
}
