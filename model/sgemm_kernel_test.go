package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
)

// kernelPaths names the GEMM kernel paths this build and CPU can run
// ("avx2", "avx512"), or "generic" when there is no assembly kernel.
func kernelPaths() []string {
	paths := []string{}
	if haveAVX2FMA {
		paths = append(paths, "avx2")
	}
	if haveAVX512 {
		paths = append(paths, "avx512")
	}
	if len(paths) == 0 {
		paths = append(paths, "generic")
	}
	return paths
}

// bf16Paths names the bfloat16 product paths this CPU has: "bf16" (VDPBF16PS), "bf16-fma" (the
// float32 kernel on rounded operands).
func bf16Paths() []string {
	if haveBF16 {
		return []string{"bf16", "bf16-fma"}
	}
	return []string{"bf16-fma"}
}

// withKernel runs f on the GEMM kernel path named by kernelPaths or bf16Paths.
func withKernel(name string, f func()) {
	if name == "bf16" || name == "bf16-fma" {
		withPrecision(BFloat16, func() { withBF16Kernel(name == "bf16", f) })
		return
	}
	if name == "generic" {
		f()
		return
	}
	old := useAVX512
	useAVX512 = name == "avx512"
	defer func() { useAVX512 = old }()
	f()
}

// TestSgemmKernelsBitIdentical checks that the AVX-512 path writes exactly
// the bits the AVX2 path writes, on random shapes (edge sizes 1, sizes that
// are not multiples of the tiles, k past gemmKC), transposes, strides,
// alpha/beta values and bias.
func TestSgemmKernelsBitIdentical(t *testing.T) {
	if !haveAVX512 || !haveAVX2FMA {
		t.Skip("needs both the AVX2 and the AVX-512 kernel")
	}
	for _, g := range gemmCases(rand.New(rand.NewPCG(3, 4)), 150) {
		var out [2][]float32
		for p, path := range []string{"avx2", "avx512"} {
			withKernel(path, func() { out[p] = g.run() })
		}
		sameBits32(t, g.String(), "avx2", out[0], "avx512", out[1])
	}
}

// gemmCase is one product of gemmCases: sgemm (or sgemmBias) on its operands.
type gemmCase struct {
	i, m, n, k, lda, ldb, ldc int
	tA, tB, useBias           bool
	alpha, beta               float32
	a, b, c0, bias            []float32
}

// gemmCases gives five Transformer-like shapes and n random ones: edge sizes 1, sizes that are
// not multiples of the tiles, k past gemmKC, transposes, strides, alpha/beta values and bias.
func gemmCases(r *rand.Rand, n int) []gemmCase {
	dims := []int{1, 2, 5, 6, 7, 11, 12, 13, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 95, 97, 130}
	ks := []int{1, 3, 8, 31, 255, 256, 257, 300, 513}
	shapes := [][3]int{{256, 256, 32}, {64, 32, 64}, {768, 384, 384}, {300, 1030, 40}, {125, 70, 600}}
	for i := 0; i < n; i++ {
		shapes = append(shapes, [3]int{dims[r.IntN(len(dims))], dims[r.IntN(len(dims))], ks[r.IntN(len(ks))]})
	}
	var out []gemmCase
	for i, s := range shapes {
		g := gemmCase{i: i, m: s[0], n: s[1], k: s[2], tA: r.IntN(2) == 1, tB: r.IntN(2) == 1}
		ab := [][2]float32{{1, 0}, {0.5, 1}, {1, 0.25}, {-1.5, 0}, {1, 1}, {0, 0.5}}[r.IntN(6)]
		g.alpha, g.beta = ab[0], ab[1]
		g.useBias = ab == [2]float32{1, 0} && r.IntN(2) == 1
		ar, ac := g.m, g.k
		if g.tA {
			ar, ac = g.k, g.m
		}
		br, bc := g.k, g.n
		if g.tB {
			br, bc = g.n, g.k
		}
		g.lda, g.ldb, g.ldc = ac+r.IntN(3), bc+r.IntN(3), g.n+r.IntN(3)
		g.a = randF32(r, (ar-1)*g.lda+ac)
		g.b = randF32(r, (br-1)*g.ldb+bc)
		g.c0 = randF32(r, (g.m-1)*g.ldc+g.n)
		g.bias = randF32(r, g.n)
		out = append(out, g)
	}
	return out
}

// run computes the case's product into a copy of c0.
func (g gemmCase) run() []float32 {
	c := append([]float32(nil), g.c0...)
	if g.useBias {
		sgemmBias(g.tA, g.tB, g.m, g.n, g.k, g.a, g.lda, g.b, g.ldb, g.bias, c, g.ldc)
	} else {
		sgemm(g.tA, g.tB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	}
	return c
}

func (g gemmCase) String() string {
	return fmt.Sprintf("%d: %dx%dx%d tA=%v tB=%v alpha,beta=%v,%v bias=%v", g.i, g.m, g.n, g.k, g.tA, g.tB, g.alpha, g.beta, g.useBias)
}

// sameBits32 fails t at the first element where x and y differ in their bits.
func sameBits32(t *testing.T, what, xName string, x []float32, yName string, y []float32) {
	t.Helper()
	for j := range x {
		if math.Float32bits(x[j]) != math.Float32bits(y[j]) {
			t.Fatalf("%s: c[%d]: %s %v (%#x), %s %v (%#x)", what, j, xName, x[j], math.Float32bits(x[j]), yName, y[j], math.Float32bits(y[j]))
		}
	}
}

// BenchmarkSgemmKernels measures the GEMM at Transformer shapes on each
// kernel path: a batch of 48 sequences of 256 tokens through H = 384
// projections and the FFN (1536), the weight gradient (tA), and one
// attention head of 32 dimensions over 256 tokens (scores, then context).
func BenchmarkSgemmKernels(b *testing.B) {
	const T = 48 * 256
	shapes := []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"proj/12288x384x384", false, false, T, 384, 384},
		{"ffn-up/12288x1536x384", false, false, T, 1536, 384},
		{"ffn-down/12288x384x1536", false, false, T, 384, 1536},
		{"grad-w/384x384x12288-tA", true, false, 384, 384, T},
		{"grad-x/12288x384x384-tB", false, true, T, 384, 384},
		{"scores/256x256x32-tB", false, true, 256, 256, 32},
		{"context/256x32x256", false, false, 256, 32, 256},
	}
	for _, s := range shapes {
		a, bb, c := randF32(rand.New(rand.NewPCG(1, 1)), s.m*s.k), randF32(rand.New(rand.NewPCG(1, 2)), s.k*s.n), make([]float32, s.m*s.n)
		lda, ldb := s.k, s.n
		if s.tA {
			lda = s.m
		}
		if s.tB {
			ldb = s.k
		}
		for _, path := range append(kernelPaths(), bf16Paths()...) {
			b.Run(s.name+"/"+path, func(b *testing.B) {
				withKernel(path, func() {
					for i := 0; i < b.N; i++ {
						sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
					}
				})
				b.ReportMetric(float64(2*s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}

// TestKernelChoice checks RAGTRAIN_KERNEL's values and reports the path
// this CPU takes.
func TestKernelChoice(t *testing.T) {
	for _, c := range []struct {
		env  string
		zen4 bool
		want bool
	}{{"", false, true}, {"", true, false}, {"avx2", false, false}, {"avx512", true, true}, {"other", false, true}} {
		if got := pickAVX512(c.env, c.zen4); got != c.want {
			t.Errorf("pickAVX512(%q, zen4=%v) = %v, want %v", c.env, c.zen4, got, c.want)
		}
	}
	t.Logf("kernel paths %v; this process uses %s (AVX-512 available: %v, Zen 4: %v)", kernelPaths(), BLAS(), haveAVX512, isZen4())
}

// TestTransformerStepKernelsBitIdentical runs one forward and backward step
// of a float32 transformer bi-encoder on each kernel path: the loss and
// every gradient must have the same bits.
func TestTransformerStepKernelsBitIdentical(t *testing.T) {
	if !haveAVX512 || !haveAVX2FMA {
		t.Skip("needs both the AVX2 and the AVX-512 kernel")
	}
	avx2, avx512 := transformerStep(t, "avx2"), transformerStep(t, "avx512")
	for i := range avx2 {
		sameBits32(t, fmt.Sprintf("output %d (0 = loss, then gradients)", i), "avx2", avx2[i], "avx512", avx512[i])
	}
}

// transformerStep runs one forward and backward step of a small float32 transformer bi-encoder
// (dropout on, fixed seeds) on the kernel path named by kernelPaths or bf16Paths and returns
// the loss, then every gradient.
func transformerStep(t *testing.T, path string) [][]float32 {
	t.Helper()
	const Q, P, L = 4, 8, 16
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 200, Hidden: 64, Layers: 2, Heads: 2, FFN: 160, MaxPosition: L, Dropout: 0.1}
	var out [][]float32
	withKernel(path, func() {
		m, err := NewBiEncoder(cfg, true, 1)
		if err != nil {
			t.Fatal(err)
		}
		pg := newPairGraphQP(t, m, Q, P, L)
		grads, err := gorgonia.Grad(pg.loss, pg.binder.Nodes()...)
		if err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(pg.g)
		defer vm.Close()
		r := rand.New(rand.NewPCG(1, 2))
		m.SetRNG(rand.New(rand.NewPCG(7, 0)))
		qi, qm, qt := tinyBatch(r, Q, L, cfg.Vocab)
		pi, pm, pt := tinyBatch(r, P, L, cfg.Vocab)
		if err := pg.qIn.Let(qi, qm, qt); err != nil {
			t.Fatal(err)
		}
		if err := pg.pIn.Let(pi, pm, pt); err != nil {
			t.Fatal(err)
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		for _, n := range append([]*gorgonia.Node{pg.loss}, grads...) {
			switch v := n.Value().Data().(type) {
			case []float32:
				out = append(out, append([]float32(nil), v...))
			case float32:
				out = append(out, []float32{v})
			default:
				t.Fatalf("%v: value of type %T", n, v)
			}
		}
	})
	return out
}
