package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// hostileCase builds a gemmCase of the given shape, transposes, strides (extra columns beyond
// the row) and alpha/beta, with operands drawn by val.
func hostileCase(i, m, n, k int, tA, tB bool, pad int, alpha, beta float32, bias bool, val func() float32) gemmCase {
	g := gemmCase{i: i, m: m, n: n, k: k, tA: tA, tB: tB, alpha: alpha, beta: beta, useBias: bias}
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	g.lda, g.ldb, g.ldc = ac+pad, bc+pad, n+pad
	fill := func(sz int) []float32 {
		v := make([]float32, sz)
		for j := range v {
			v[j] = val()
		}
		return v
	}
	g.a, g.b = fill((ar-1)*g.lda+ac), fill((br-1)*g.ldb+bc)
	g.c0, g.bias = fill((m-1)*g.ldc+n), fill(n)
	return g
}

// wideVal draws values whose sums round often: a random bfloat16 mantissa times 2^e for e in
// [-24, 24], either sign, a few exact zeros.
func wideVal(r *rand.Rand) func() float32 {
	return func() float32 {
		if r.IntN(20) == 0 {
			return 0
		}
		m := float32(128+r.IntN(128)) / 128
		if r.IntN(2) == 0 {
			m = -m
		}
		// plus low bits that the bfloat16 rounding drops (ties included)
		x := math.Float32bits(m * float32(math.Ldexp(1, r.IntN(49)-24)))
		switch r.IntN(3) {
		case 0:
			x |= 0x8000 // a tie
		case 1:
			x |= uint32(r.IntN(1 << 16))
		}
		return math.Float32frombits(x)
	}
}

// runBF16Paths computes g with bfloat16 products on the FMA path and (where the CPU has it, else
// nil) on VDPBF16PS.
func runBF16Paths(g gemmCase) (fma, native []float32) {
	withPrecision(BFloat16, func() {
		withBF16Kernel(false, func() { fma = g.run() })
		if haveBF16 {
			withBF16Kernel(true, func() { native = g.run() })
		}
	})
	return fma, native
}

// checkThree compares refBF16, the FMA path and (where the CPU has it) VDPBF16PS on g.
func checkThree(t *testing.T, g gemmCase) { checkPaths(t, g, "plain Go", refBF16(g)) }

// checkPaths compares refBF16 with the FMA path, and nativeRef (named what) with VDPBF16PS where
// the CPU has it.
func checkPaths(t *testing.T, g gemmCase, what string, nativeRef []float32) {
	t.Helper()
	ref := refBF16(g)
	fma, native := runBF16Paths(g)
	sameBits32(t, g.String(), "plain Go", ref, "FMA kernel", fma)
	if haveBF16 {
		sameBits32(t, g.String(), what, nativeRef, "VDPBF16PS", native)
	}
}

// TestBF16HostileShapes: edge shapes around the tiles and blocks (12 x 32, gemmKC, gemmMC,
// gemmNC), all four transpositions, padded leading dimensions, alpha/beta values and bias, on
// values of a wide exponent range whose sums round at nearly every step.
func TestBF16HostileShapes(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel")
	}
	r := rand.New(rand.NewPCG(21, 22))
	val := wideVal(r)
	shapes := [][3]int{
		{1, 1, 1}, {1, 1, 2}, {11, 31, 1}, {12, 32, 2}, {13, 33, 3}, {12, 32, 255}, {12, 32, 256},
		{13, 33, 257}, {31, 1, 511}, {1, 33, 512}, {32, 11, 513}, {121, 33, 13}, {241, 17, 31},
		{5, 1025, 7}, {13, 1057, 33}, {3, 2049, 3}, {125, 1030, 40}, {255, 257, 33}, {257, 255, 31},
	}
	abs := [][2]float32{{1, 0}, {0.75, 1}, {-1.5, 0.3}, {1, -2}, {0, 0.5}, {3.1, 0}, {-1, 1}}
	i := 0
	for _, s := range shapes {
		for tt := 0; tt < 4; tt++ {
			ab := abs[r.IntN(len(abs))]
			g := hostileCase(i, s[0], s[1], s[2], tt&1 == 1, tt&2 == 2, r.IntN(3), ab[0], ab[1], false, val)
			checkThree(t, g)
			i++
			g = hostileCase(i, s[0], s[1], s[2], tt&1 == 1, tt&2 == 2, r.IntN(3), 1, 0, true, val)
			checkThree(t, g)
			i++
		}
	}
}

// TestBF16Workers: a product large enough for several row blocks and workers gives the same bits
// at GOMAXPROCS 1 and 2 (and the reference's).
func TestBF16Workers(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel")
	}
	r := rand.New(rand.NewPCG(31, 32))
	g := hostileCase(0, 250, 1100, 40, false, true, 1, 1, 0, true, wideVal(r))
	one, two := make([][]float32, 2), make([][]float32, 2)
	for n, out := range [][][]float32{one, two} {
		old := runtime.GOMAXPROCS(n + 1)
		withPrecision(BFloat16, func() {
			withBF16Kernel(false, func() { out[0] = g.run() })
			if haveBF16 {
				withBF16Kernel(true, func() { out[1] = g.run() })
			}
		})
		runtime.GOMAXPROCS(old)
	}
	ref := refBF16(g)
	sameBits32(t, "FMA", "1 worker", one[0], "2 workers", two[0])
	sameBits32(t, "FMA", "ref", ref, "2 workers", two[0])
	if haveBF16 {
		sameBits32(t, "VDPBF16PS", "1 worker", one[1], "2 workers", two[1])
		sameBits32(t, "VDPBF16PS", "ref", ref, "2 workers", two[1])
	}
}

// TestBF16SpecialValues: NaN, infinities, values that round to infinity, subnormal inputs and
// alpha·a overflowing; the three paths agree (NaN payloads compared too).
func TestBF16SpecialValues(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel")
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7f7fffff), math.Float32frombits(0xff7fffff), math.Float32frombits(1),
		math.Float32frombits(0x807fffff), 0, float32(math.Copysign(0, -1)), 1e30, -3e38}
	r := rand.New(rand.NewPCG(41, 42))
	i := 0
	for _, frac := range []int{2, 10, 50} {
		val := func() float32 {
			if r.IntN(frac) == 0 {
				return specials[r.IntN(len(specials))]
			}
			return float32(r.NormFloat64())
		}
		for _, s := range [][3]int{{13, 33, 9}, {24, 64, 40}, {1, 17, 300}} {
			for tt := 0; tt < 4; tt++ {
				for _, ab := range [][2]float32{{1, 0}, {1e10, 1}, {-1, 0.5}} {
					g := hostileCase(i, s[0], s[1], s[2], tt&1 == 1, tt&2 == 2, 1, ab[0], ab[1], false, val)
					t.Run(fmt.Sprint(i), func(t *testing.T) { checkSpecial(t, g) })
					i++
				}
			}
		}
	}
}

// checkSpecial: the two kernels give the same bits (NaN payloads included); the reference gives
// the same values, NaNs where they have NaNs (its NaN payloads are its own).
func checkSpecial(t *testing.T, g gemmCase) {
	t.Helper()
	ref := refBF16(g)
	fma, native := runBF16Paths(g)
	for j := range ref {
		if x, y := ref[j], fma[j]; math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
			t.Fatalf("%s: c[%d]: plain Go %v (%#x), FMA kernel %v (%#x)", g, j, x, math.Float32bits(x), y, math.Float32bits(y))
		}
	}
	if haveBF16 {
		sameBits32(t, g.String(), "FMA kernel", fma, "VDPBF16PS", native)
	}
}

// refBF16Flush is refBF16 with each partial sum inside a block of k flushed to a zero of its
// sign when subnormal, as VDPBF16PS does (its products themselves are not flushed:
// TestBF16SubnormalProduct).
func refBF16Flush(g gemmCase) []float32 {
	c := append([]float32(nil), g.c0...)
	op := func(x []float32, ld int, t bool, r, q int) float32 {
		if t {
			return x[q*ld+r]
		}
		return x[r*ld+q]
	}
	ftz := func(x float32) float32 {
		if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
			return float32(math.Copysign(0, float64(x)))
		}
		return x
	}
	if g.beta != 0 || g.alpha == 0 || g.useBias {
		panic("refBF16Flush: alpha != 0, beta 0, no bias only")
	}
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			v := &c[i*g.ldc+j]
			for pc := 0; pc < g.k; pc += gemmKC {
				var acc float32
				for p := pc; p < min(pc+gemmKC, g.k); p += 2 {
					for _, q := range []int{p + 1, p} {
						if q < g.k {
							acc = ftz(fusedAdd(acc, RoundBF16(g.alpha*op(g.a, g.lda, g.tA, i, q)), RoundBF16(op(g.b, g.ldb, !g.tB, j, q))))
						} else {
							acc = ftz(acc + 0)
						}
					}
				}
				if pc == 0 {
					*v = acc
				} else {
					*v += acc
				}
			}
		}
	}
	return c
}

// TestBF16TinyProducts: products near and below the float32 normal range (partial sums often
// subnormal): the FMA path is the reference's bits; VDPBF16PS is the reference's with each
// subnormal partial sum flushed to zero, the one difference the package notes allow.
func TestBF16TinyProducts(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel")
	}
	r := rand.New(rand.NewPCG(51, 52))
	i := 0
	for _, s := range [][3]int{{12, 32, 8}, {13, 33, 31}, {25, 40, 300}} {
		for tt := 0; tt < 4; tt++ {
			for _, lo := range []int{-70, -63, -56} {
				val := func() float32 {
					e := lo - r.IntN(8) // products near 2^(2·lo)
					if r.IntN(4) == 0 {
						e = lo + 4
					}
					m := float32(128+r.IntN(128)) / 128
					if r.IntN(2) == 0 {
						m = -m
					}
					return m * float32(math.Ldexp(1, e))
				}
				g := hostileCase(i, s[0], s[1], s[2], tt&1 == 1, tt&2 == 2, 1, 1, 0, false, val)
				checkPaths(t, g, "plain Go, subnormal partial sums flushed", refBF16Flush(g))
				i++
			}
		}
	}
}

// TestBF16SubnormalProduct: a subnormal product added to a normal partial sum (2^-120 +
// 1.5·2^-127, every partial sum normal) is exact on both kernels.
func TestBF16SubnormalProduct(t *testing.T) {
	if !haveAVX2FMA {
		t.Skip("no float32 kernel")
	}
	const want = float32(0x1p-120 + 1.5*0x1p-127)
	for _, mn := range [][2]int{{1, 1}, {12, 32}} {
		m, n := mn[0], mn[1]
		a, b := make([]float32, m*2), make([]float32, 2*n)
		for i := 0; i < m; i++ {
			a[i*2], a[i*2+1] = 1.5*0x1p-64, 0x1p-60
		}
		for j := 0; j < n; j++ {
			b[j], b[n+j] = 0x1p-63, 0x1p-60
		}
		for _, native := range []bool{false, true} {
			if native && !haveBF16 {
				continue
			}
			c := make([]float32, m*n)
			withPrecision(BFloat16, func() {
				withBF16Kernel(native, func() { sgemm(false, false, m, n, 2, 1, a, 2, b, n, 0, c, n) })
			})
			for j, v := range c {
				if v != want {
					t.Fatalf("%dx%d native=%v: c[%d] = %g, want %g", m, n, native, j, v, want)
				}
			}
		}
	}
}
