package model

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// withPrecision runs f with the layers' products in precision p.
func withPrecision(p Precision, f func()) {
	old := SetMatmulPrecision(p)
	defer SetMatmulPrecision(old)
	f()
}

// withBF16Kernel runs f with bfloat16 products on VDPBF16PS (native) or the float32 FMA kernel.
func withBF16Kernel(native bool, f func()) {
	old := useBF16Kernel
	useBF16Kernel = native
	defer func() { useBF16Kernel = old }()
	f()
}

// TestToBF16 checks the rounding on values whose bfloat16 is known by hand.
func TestToBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // 1 + 2^-8: the tie goes to the even 1
		{0x3f818000, 0x3f82}, // 1 + 3·2^-8: the tie goes to the even 1 + 2^-6
		{0x3f808001, 0x3f81}, // just above the tie
		{0xc0490fdb, 0xc049}, // -π
		{0x7f7fffff, 0x7f80}, // the largest float32 rounds to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0xff800000, 0xff80}, // -Inf
		{0x00000001, 0x0000}, // a subnormal becomes +0
		{0x807fffff, 0x8000}, // a negative subnormal: -0 (VCVTNEPS2BF16 flushes it before rounding)
		{0x00800000 - 1, 0x0000},
		{0x00800000, 0x0080}, // the smallest normal
	} {
		if got := toBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("toBF16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if got := fromBF16(toBF16(float32(math.NaN()))); !math.IsNaN(float64(got)) {
		t.Errorf("NaN rounds to %v", got)
	}
	if got := toBF16(math.Float32frombits(0x7f800001)); got&0x7fff <= 0x7f80 {
		t.Errorf("a signalling NaN with only low payload bits rounds to %#04x, not a NaN", got)
	}
}

// TestCvtBF16MatchesToBF16: the VCVTNEPS2BF16 conversion gives toBF16's bits on every special
// class (zeros, subnormals, the largest values, ties, NaNs, infinities) and random patterns,
// at lengths around its 16-value step, scaled by alpha.
func TestCvtBF16MatchesToBF16(t *testing.T) {
	if !haveBF16 {
		t.Skip("no AVX512-BF16 on this CPU: cvtBF16 is toBF16 itself here")
	}
	r := rand.New(rand.NewPCG(11, 12))
	special := []uint32{0, 0x80000000, 1, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f800000,
		0xff800000, 0x7fc00000, 0x7f800001, 0xffbfffff, 0x3f808000, 0x3f818000, 0x3f808001, 0x477fff80}
	for _, n := range []int{1, 15, 16, 17, 31, 32, 33, 100, 4096} {
		for _, alpha := range []float32{1, 0.125, -3} {
			src := make([]float32, n)
			for i := range src {
				if i < len(special) && n >= 16 {
					src[i] = math.Float32frombits(special[i])
				} else {
					src[i] = math.Float32frombits(r.Uint32())
				}
			}
			got := make([]uint16, n)
			cvtBF16(got, src, alpha)
			for i, x := range src {
				if want := toBF16(alpha * x); got[i] != want && !(isNaN16(got[i]) && isNaN16(want)) {
					t.Fatalf("n %d alpha %v: %#08x -> %#04x, toBF16 %#04x", n, alpha, math.Float32bits(x), got[i], want)
				}
			}
		}
	}
}

func isNaN16(h uint16) bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }

// refBF16 is the product of the package notes, element by element in plain Go: c[i][j] =
// beta·c + Σ over blocks of gemmKC values of k (block sums from zero, pairs odd product first),
// or the first block's sum plus bias (useBias). Each product is added with one rounding
// (fusedAdd).
func refBF16(g gemmCase) []float32 {
	c := append([]float32(nil), g.c0...)
	at := func(i, p int) float32 {
		if p >= g.k {
			return 0
		}
		if g.tA {
			return RoundBF16(g.alpha * g.a[p*g.lda+i])
		}
		return RoundBF16(g.alpha * g.a[i*g.lda+p])
	}
	bt := func(p, j int) float32 {
		if p >= g.k {
			return 0
		}
		if g.tB {
			return RoundBF16(g.b[j*g.ldb+p])
		}
		return RoundBF16(g.b[p*g.ldb+j])
	}
	alpha, beta := g.alpha, g.beta
	overwrite := beta == 0 && g.k > 0 && alpha != 0 // sgemm's first block writes c
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			v := &c[i*g.ldc+j]
			if beta != 1 && !overwrite {
				*v = beta * *v
				if beta == 0 {
					*v = 0
				}
			}
			for pc := 0; pc < g.k && alpha != 0; pc += gemmKC {
				var acc float32
				for p := pc; p < min(pc+gemmKC, g.k); p += 2 {
					acc = fusedAdd(acc, at(i, p+1), bt(p+1, j))
					acc = fusedAdd(acc, at(i, p), bt(p, j))
				}
				switch {
				case !overwrite || pc > 0:
					*v += acc
				case g.useBias:
					*v = acc + g.bias[j]
				default:
					*v = acc
				}
			}
		}
	}
	return c
}

// fusedAdd is acc + x·y rounded once to float32, as an FMA and VDPBF16PS add a product of two
// bfloat16 values: the product is exact in float64, but not always in float32 (it can overflow,
// or fall below the normal range), so acc + float32(x*y) would round twice there.
func fusedAdd(acc, x, y float32) float32 {
	p := float64(x) * float64(y)
	switch {
	case math.IsNaN(float64(acc)):
		return acc
	case math.IsNaN(p) || math.IsInf(p, 0):
		return acc + x*y
	case math.IsInf(float64(acc), 0):
		return acc
	case p == float64(float32(p)): // exact in float32: one rounding either way
		return acc + float32(p)
	}
	s := new(big.Float).SetPrec(2000).SetFloat64(p)
	s.Add(s, new(big.Float).SetFloat64(float64(acc)))
	if s.Sign() == 0 {
		return 0
	}
	f, _ := s.Float32()
	return f
}

// TestBF16KernelsBitIdentical: VDPBF16PS (where the CPU has it), the float32 FMA kernels on the
// rounded operands, and refBF16 in plain Go give the same bits on every case of gemmCases.
func TestBF16KernelsBitIdentical(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel: bfloat16 products go through gonum, whose order is its own")
	}
	if !haveBF16 {
		t.Log("no AVX512-BF16 on this CPU: the VDPBF16PS path is not tested here, only the FMA path against plain Go")
	}
	for _, g := range gemmCases(rand.New(rand.NewPCG(5, 6)), 150) {
		checkThree(t, g)
	}
}

// TestBF16ProductBound: against the float64 product of the unrounded operands, each element of a
// bfloat16 product is within ((1+2^-8)^2 (1 + k·2^-24·1.01) − 1)·Σ_p |a_ip||b_pj| (each operand
// rounded once with unit roundoff 2^-8, k float32 additions; Higham, Accuracy and Stability of
// Numerical Algorithms, 2nd ed., eq. 3.5), and the bound is not loose by orders of magnitude:
// the largest error uses at least 1% of it.
func TestBF16ProductBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	worst := 0.0
	withPrecision(BFloat16, func() {
		for _, s := range [][3]int{{37, 45, 384}, {12, 32, 1}, {64, 96, 1536}, {5, 7, 257}} {
			m, n, k := s[0], s[1], s[2]
			a, b := randF32(r, m*k), randF32(r, k*n)
			c := make([]float32, m*n)
			sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var exact, abs float64
					for p := 0; p < k; p++ {
						x, y := float64(a[i*k+p]), float64(b[p*n+j])
						exact += x * y
						abs += math.Abs(x * y)
					}
					bound := ((1+0x1p-8)*(1+0x1p-8)*(1+float64(k)*0x1p-24*1.01) - 1) * abs
					err := math.Abs(float64(c[i*n+j]) - exact)
					if err > bound {
						t.Fatalf("%dx%dx%d c[%d][%d] = %v, exact %v: error %.3g above the bound %.3g", m, n, k, i, j, c[i*n+j], exact, err, bound)
					}
					worst = max(worst, err/bound)
				}
			}
		}
	})
	if worst < 0.01 {
		t.Fatalf("largest error %.3g of the bound: the products were not rounded to bfloat16", worst)
	}
	t.Logf("largest error: %.3f of the bound", worst)
}

// TestMatmulPrecision: the setting is read back, float32 stays the default, names parse, and
// Sgemm (search, k-means) keeps float32 products under BFloat16.
func TestMatmulPrecision(t *testing.T) {
	if MatmulPrecision() != Float32 {
		t.Fatalf("default precision %v", MatmulPrecision())
	}
	for _, s := range []string{"float32", "bf16"} {
		p, err := ParsePrecision(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePrecision(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParsePrecision("fp16"); err == nil {
		t.Error("fp16 accepted")
	}
	r := rand.New(rand.NewPCG(9, 9))
	a, b := randF32(r, 6*40), randF32(r, 40*16)
	want, got, bf := make([]float32, 96), make([]float32, 96), make([]float32, 96)
	Sgemm(false, false, 6, 16, 40, 1, a, 40, b, 16, 0, want, 16)
	withPrecision(BFloat16, func() {
		if MatmulPrecision() != BFloat16 {
			t.Fatal("SetMatmulPrecision(BFloat16) not read back")
		}
		Sgemm(false, false, 6, 16, 40, 1, a, 40, b, 16, 0, got, 16)
		sgemm(false, false, 6, 16, 40, 1, a, 40, b, 16, 0, bf, 16)
	})
	sameBits32(t, "Sgemm under BFloat16", "float32", want, "under bf16", got)
	same := 0
	for i := range bf {
		if bf[i] == want[i] {
			same++
		}
	}
	if same == len(bf) {
		t.Fatal("the layers' product under BFloat16 equals the float32 one")
	}
	t.Logf("bfloat16 products on %s", BF16Kernel())
}

// TestTransformerStepBF16: one training step of a small transformer with bfloat16 products
// gives the same bits on VDPBF16PS and on the FMA kernel (loss and every gradient), and stays
// near the float32 step: the loss within 1% (but not equal) and each gradient tensor within 2%
// in relative L2 norm (measured: at most 0.8%, bfloat16's unit roundoff being 0.4%); the key
// biases' gradients, zero in exact arithmetic (softmax ignores a shift of a query's scores) and
// about 1e-9 in float32, stay under 1e-3 in norm.
func TestTransformerStepBF16(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel")
	}
	f32, fma := transformerStep(t, kernelPaths()[len(kernelPaths())-1]), transformerStep(t, "bf16-fma")
	if haveBF16 {
		native := transformerStep(t, "bf16")
		for i := range fma {
			sameBits32(t, fmt.Sprintf("output %d (0 = loss, then gradients)", i), "bf16-fma", fma[i], "VDPBF16PS", native[i])
		}
	} else {
		t.Log("no AVX512-BF16 on this CPU: only the FMA path ran")
	}
	if d := math.Abs(float64(fma[0][0]-f32[0][0])) / math.Abs(float64(f32[0][0])); d > 0.01 || d == 0 {
		t.Fatalf("loss %v in bf16, %v in float32: relative difference %.3g, want in (0, 0.01]", fma[0][0], f32[0][0], d)
	}
	worst := 0.0
	for i := 1; i < len(f32); i++ {
		var diff, norm float64
		for j := range f32[i] {
			d := float64(fma[i][j] - f32[i][j])
			diff += d * d
			norm += float64(f32[i][j]) * float64(f32[i][j])
		}
		if norm == 0 {
			continue
		}
		if math.Sqrt(norm) < 1e-6 { // the key bias: its gradient is 0 in exact arithmetic
			if math.Sqrt(diff) > 1e-3 {
				t.Fatalf("gradient %d: zero in float32 (norm %.3g), %.3g in bf16", i, math.Sqrt(norm), math.Sqrt(diff))
			}
			continue
		}
		rel := math.Sqrt(diff / norm)
		if rel > 0.02 {
			t.Fatalf("gradient %d: relative L2 difference %.3g from float32", i, rel)
		}
		worst = max(worst, rel)
	}
	t.Logf("loss %v (float32 %v); largest gradient relative L2 difference %.3g", fma[0][0], f32[0][0], worst)
}

// BenchmarkMicroKernels times the 12 x 32 micro-kernels alone on hot packed panels (k = 256: 128
// bfloat16 pairs, or 256 float32 values), one thread: the products' ceiling, before packing.
func BenchmarkMicroKernels(b *testing.B) {
	if !haveAVX512 {
		b.Skip("no AVX-512 kernel")
	}
	const kp = 128
	c := make([]float32, gemmZMR*gemmZNR)
	flops := func(b *testing.B) {
		b.ReportMetric(float64(2*gemmZMR*gemmZNR*2*kp)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
	}
	b.Run("float32", func(b *testing.B) {
		a, bb := randF32(rand.New(rand.NewPCG(1, 1)), gemmZMR*2*kp), randF32(rand.New(rand.NewPCG(1, 2)), gemmZNR*2*kp)
		for b.Loop() {
			sgemmKernel12x32AVX512(2*kp, &a[0], gemmMR*2*kp, &bb[0], gemmNR*2*kp, &c[0], gemmZNR, nil, false)
		}
		flops(b)
	})
	if !haveBF16 {
		return
	}
	b.Run("bf16", func(b *testing.B) {
		a, bb := make([]uint32, gemmZMR*kp), make([]uint32, gemmZNR*kp)
		for i := range a {
			a[i] = 0x3f803f80
		}
		for i := range bb {
			bb[i] = 0x3f803f80
		}
		for b.Loop() {
			sbgemmKernel12x32BF16(kp, &a[0], kp, &bb[0], gemmNR*kp, &c[0], gemmZNR, nil, false)
		}
		flops(b)
	})
}
