package model

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Mixed precision: the float32 layers' matrix products with bfloat16 inputs and float32
// accumulation (the scheme of PyTorch's autocast on CPU and of Micikevicius et al. 2018, with
// bfloat16 in place of float16: Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning
// Training"). Only the products change: weights, their gradients and the optimizer state stay
// float32, and so do softmax, norms, losses and every reduction outside a product.
//
// Each product rounds both operands to bfloat16 (round to nearest even; a subnormal becomes a
// zero of its sign, as VCVTNEPS2BF16 does and VDPBF16PS treats subnormal inputs) and sums in
// float32, k in pairs: the accumulator of c[i][j] adds a[i][2q+1]·b[2q+1][j], then
// a[i][2q]·b[2q][j] (each product of two bfloat16 values is exact in float32, each addition
// rounds to nearest even), pair after pair from zero within each block of gemmKC values of k,
// the blocks added to c in order, as the float32 path adds its blocks. Two kernels give these
// bits: VDPBF16PS (AVX512-BF16: sbgemmKernel12x32BF16, where the CPU has it) and, elsewhere, the
// float32 FMA kernels over the rounded operands with each pair's two values swapped (an FMA of
// an exact product is the same rounding). VDPBF16PS also flushes a subnormal accumulator to
// zero; the FMA path does not, so the two can differ only where a partial sum falls below
// 1.2e-38 in magnitude. Tests: TestBF16KernelsBitIdentical, TestBF16ProductBound.

// Precision names the inputs of the layers' float32 matrix products.
type Precision int32

const (
	// Float32 products (the default).
	Float32 Precision = iota
	// BFloat16 products: operands rounded to bfloat16, float32 accumulation.
	BFloat16
)

// String gives the recipe's name of p: "float32" or "bf16".
func (p Precision) String() string {
	if p == BFloat16 {
		return "bf16"
	}
	return "float32"
}

// ParsePrecision reads a recipe's precision: "float32" or "bf16".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "float32":
		return Float32, nil
	case "bf16":
		return BFloat16, nil
	}
	return Float32, fmt.Errorf("precision %q: want \"float32\" or \"bf16\"", s)
}

var matmulPrecision atomic.Int32

// SetMatmulPrecision sets, for the whole process, the precision of the products of the float32
// layers: the graphs' matrix products forward and backward (linear layers, attention, heads) and
// LLaMA decoding. It returns the previous setting. Sgemm, the product for callers outside the
// graphs (search, k-means), stays float32.
func SetMatmulPrecision(p Precision) Precision {
	return Precision(matmulPrecision.Swap(int32(p)))
}

// MatmulPrecision is the precision SetMatmulPrecision set (Float32 unless it was called).
func MatmulPrecision() Precision { return Precision(matmulPrecision.Load()) }

func bf16Products() bool { return matmulPrecision.Load() == int32(BFloat16) }

// BF16Kernel names the kernel of bfloat16 products on this machine: "AVX512-BF16 VDPBF16PS" or
// the float32 kernel that emulates it (see the package's mixed-precision notes).
func BF16Kernel() string {
	if useBF16Kernel {
		return "AVX512-BF16 VDPBF16PS"
	}
	return BLAS() + " on bf16-rounded operands"
}

// toBF16 rounds x to bfloat16 (the high 16 bits of its float32 pattern) as VCVTNEPS2BF16 does
// (Intel SDM, convert_fp32_to_bfloat16): to nearest even; NaN stays NaN (quiet); a subnormal x
// becomes a zero of its sign.
func toBF16(x float32) uint16 {
	u := math.Float32bits(x)
	switch {
	case u&0x7fffffff > 0x7f800000:
		return uint16(u>>16) | 0x40
	case u&0x7f800000 == 0:
		return uint16(u>>16) & 0x8000
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// fromBF16 is the float32 of bfloat16 h.
func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundBF16 is x rounded to bfloat16 and back to float32, as the products see it.
func RoundBF16(x float32) float32 { return fromBF16(toBF16(x)) }

// sbgemm is sgemm (bias nil) or sgemmBias (bias not nil: beta 0, alpha 1) with bfloat16
// products: alpha·op(a) and op(b) rounded to bfloat16, float32 sums.
func sbgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, bias []float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemms(tA, tB, m, n, k, a, lda, b, ldb, c, ldc)
	if k == 0 || alpha == 0 {
		prepareC(m, n, k, alpha, beta, c, ldc)
		return
	}
	if !useBF16Kernel {
		sbgemmFMA(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc)
		return
	}
	sbgemmKernel(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, nil)
}

// sbgemmKernel is sbgemm on VDPBF16PS (k > 0, alpha != 0), op(b) packed here or, when pb is not
// nil, read from pb (b unused).
func sbgemmKernel(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, bias []float32, c []float32, ldc int, pb *packedBF16) {
	overwrite := prepareC(m, n, k, alpha, beta, c, ldc)
	workers := runtime.GOMAXPROCS(0)
	if m*n*k < 1<<21 {
		workers = 1
	}
	const mr, nr = gemmZMR, gemmZNR
	mc := min(gemmMC, roundUp((m+workers-1)/workers, mr))
	nBlocks := (m + mc - 1) / mc
	kcp := gemmKC / 2
	var buf []uint32
	if pb == nil {
		bBuf := getBufU32(kcp * roundUp(min(n, gemmNC), nr))
		defer u32Pool.Put(bBuf)
		buf = *bBuf
	}
	block := 0 // index of the (jc, pc) block in pb
	for jc := 0; jc < n; jc += gemmNC {
		nb := min(gemmNC, n-jc)
		for pc := 0; pc < k; pc, block = pc+gemmKC, block+1 {
			kb := min(gemmKC, k-pc)
			kbp := (kb + 1) / 2
			bp := buf
			if pb != nil {
				bp = pb.blocks[block]
			} else {
				packBBlockBF16(bp, b, ldb, tB, jc, nb, pc, kb, workers)
			}
			blockWork := mc * nb * kb
			if workers == 1 {
				blockWork = 0
			}
			parallelFor(nBlocks, blockWork, func(lo, hi int) {
				aBuf := getBufU32(roundUp(mc, mr) * kbp)
				defer u32Pool.Put(aBuf)
				ap := *aBuf
				var tmp [mr * nr]float32
				for blk := lo; blk < hi; blk++ {
					ic := blk * mc
					mb := min(mc, m-ic)
					packABF16(ap, a, lda, tA, ic, mb, roundUp(mb, mr), pc, kb, alpha)
					add := !overwrite || pc > 0
					for jr := 0; jr < nb; jr += nr {
						var bb []float32 // bias of these columns, first k block only
						if bias != nil && !add {
							bb = bias[jc+jr : jc+min(jr+nr, nb)]
						}
						bS := kbp * gemmNR
						for ir := 0; ir < mb; ir += mr {
							ci := (ic+ir)*ldc + jc + jr
							if mb-ir >= mr && nb-jr >= nr {
								var bptr *float32
								if bb != nil {
									bptr = &bb[0]
								}
								sbgemmKernel12x32BF16(kbp, &ap[ir*kbp], kbp, &bp[(jr/gemmNR)*bS], bS, &c[ci], ldc, bptr, add)
								continue
							}
							sbgemmKernel12x32BF16(kbp, &ap[ir*kbp], kbp, &bp[(jr/gemmNR)*bS], bS, &tmp[0], nr, nil, false)
							mergeBlock(c[ci:], ldc, tmp[:], nr, min(mr, mb-ir), min(nr, nb-jr), add, bb)
						}
					}
				}
			})
		}
	}
}

// packBBlockBF16 packs columns jc..jc+nb-1, rows pc..pc+kb-1 of op(b) into dst as
// sbgemmKernel reads them: roundUp(nb, 32)/16 panels of packBBF16 (a last odd panel all zero).
func packBBlockBF16(dst []uint32, b []float32, ldb int, tB bool, jc, nb, pc, kb, workers int) {
	kbp := (kb + 1) / 2
	packWork := kbp * gemmNR
	if workers == 1 {
		packWork = 0
	}
	parallelFor(roundUp(nb, gemmZNR)/gemmNR, packWork, func(lo, hi int) {
		for jp := lo; jp < hi; jp++ {
			packBBF16(dst[jp*kbp*gemmNR:(jp+1)*kbp*gemmNR], b, ldb, tB, pc, kb, jc+jp*gemmNR, max(0, min(gemmNR, nb-jp*gemmNR)))
		}
	})
}

// packedBF16 is a weight matrix w [n,k] packed once as op(b) = wᵀ of sbgemmKernel (every block of
// gemmNC columns and gemmKC rows, in the kernel's order), for products that would otherwise round
// the same weights again at every call: LLaMA decoding steps (bf16Weights).
type packedBF16 struct {
	n, k   int
	blocks [][]uint32
}

func packWeightsBF16(w []float32, n, k int) *packedBF16 {
	p := &packedBF16{n: n, k: k}
	for jc := 0; jc < n; jc += gemmNC {
		nb := min(gemmNC, n-jc)
		for pc := 0; pc < k; pc += gemmKC {
			kb := min(gemmKC, k-pc)
			blk := make([]uint32, (kb+1)/2*roundUp(nb, gemmZNR))
			packBBlockBF16(blk, w, k, true, jc, nb, pc, kb, runtime.GOMAXPROCS(0))
			p.blocks = append(p.blocks, blk)
		}
	}
	return p
}

// bf16Weights packs weight matrices on first use and keeps them (by name) for the products of
// one LlamaDecoder.Generate call: x [m,k] · wᵀ with the bits of sgemm(false, true, ...) under
// BFloat16. Not safe for concurrent use; the weights must not change while it is held.
type bf16Weights map[string]*packedBF16

// matMulT sets out [m,n] = x [m,k] · wᵀ (w [n,k], packed under name on first use).
func (bw bf16Weights) matMulT(name string, out, x, w []float32, m, n, k int) {
	p := bw[name]
	if p == nil || p.n != n || p.k != k {
		p = packWeightsBF16(w, n, k)
		bw[name] = p
	}
	checkGemm(false, m, k, x, k, "a")
	checkGemm(false, m, n, out, n, "c")
	sbgemmKernel(false, true, m, n, k, 1, x, k, nil, k, 0, nil, out, n, p)
}

// mergeBlock writes the rows x cols corner of the block src (row stride lds) into dst (row
// stride ldd): added to dst (add), plus bias (bias not nil), or copied.
func mergeBlock(dst []float32, ldd int, src []float32, lds, rows, cols int, add bool, bias []float32) {
	for r := 0; r < rows; r++ {
		d, s := dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols]
		switch {
		case add:
			addInto(d, s)
		case bias != nil:
			for j := range d {
				d[j] = s[j] + bias[j]
			}
		default:
			copy(d, s)
		}
	}
}

// prepareC scales c by beta before a product is added to it, and reports whether the first
// block of k overwrites c instead (beta 0: no clearing pass).
func prepareC(m, n, k int, alpha, beta float32, c []float32, ldc int) (overwrite bool) {
	overwrite = beta == 0 && k > 0 && alpha != 0
	if beta != 1 && !overwrite {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
			} else {
				for j := range row {
					row[j] *= beta
				}
			}
		}
	}
	return overwrite
}

// cvtBF16 sets dst[i] = toBF16(alpha·src[i]) for i < len(src), with VCVTNEPS2BF16 (the same bits)
// where the CPU has it.
func cvtBF16(dst []uint16, src []float32, alpha float32) {
	if len(src) == 0 {
		return
	}
	_ = dst[len(src)-1]
	done := 0
	if haveBF16 && len(src) >= 16 {
		done = len(src) &^ 15
		cvtBF16x16(&dst[0], &src[0], done, alpha)
	}
	for i := done; i < len(src); i++ {
		dst[i] = toBF16(alpha * src[i])
	}
}

// packABF16 packs rows i0..i0+mb-1, columns p0..p0+kb-1 of alpha·op(a) into rows of bfloat16
// pairs, row-major: dst[r*kp + q] holds columns 2q (low half) and 2q+1 (high half) of row r (kp
// = ceil(kb/2); an odd kb's last pair has a zero high half), the layout of
// sbgemmKernel12x32BF16's A; rows mb..rows-1 are zero. kb <= gemmKC, mb <= gemmMC.
func packABF16(dst []uint32, a []float32, lda int, tA bool, i0, mb, rows, p0, kb int, alpha float32) {
	kp := (kb + 1) / 2
	clear(dst[mb*kp : rows*kp])
	if !tA { // row r of op(a) is contiguous: converted in place, pairs in the right halves
		for r := 0; r < mb; r++ {
			row := dst[r*kp : (r+1)*kp]
			row[kp-1] = 0 // an odd kb's high half
			cvtBF16(u16s(row), a[(i0+r)*lda+p0:(i0+r)*lda+p0+kb], alpha)
		}
		return
	}
	// tA: columns 2q and 2q+1 of op(a) are rows of a, contiguous over the mb rows of op(a):
	// converted 8 pairs at a time, then written 8 pairs to a row (32 contiguous bytes).
	const g = 8
	var x, y [g][gemmMC]uint16
	for q0 := 0; q0 < kp; q0 += g {
		n := min(g, kp-q0)
		for t := 0; t < n; t++ {
			q := q0 + t
			row := (p0+2*q)*lda + i0
			cvtBF16(x[t][:mb], a[row:row+mb], alpha)
			if 2*q+1 < kb {
				cvtBF16(y[t][:mb], a[row+lda:row+lda+mb], alpha)
			} else {
				clear(y[t][:mb])
			}
		}
		for r := 0; r < mb; r++ {
			d := dst[r*kp+q0 : r*kp+q0+n]
			for t := range d {
				d[t] = uint32(x[t][r]) | uint32(y[t][r])<<16
			}
		}
	}
}

// u16s views pairs as the bfloat16 values they hold, the low half of each first (little-endian:
// the layout VDPBF16PS reads).
func u16s(pairs []uint32) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(pairs))), 2*len(pairs))
}

// packBBF16 packs rows p0..p0+kb-1, columns j0..j0+nr-1 (nr <= 16) of op(b) into one 16-column
// panel of bfloat16 pairs: dst[q*16 + j] holds rows 2q (low half) and 2q+1 (high half) of column
// j; columns past nr and an odd kb's last high half are zero. kb <= gemmKC.
func packBBF16(dst []uint32, b []float32, ldb int, tB bool, p0, kb, j0, nr int) {
	kp := (kb + 1) / 2
	if nr < gemmNR {
		clear(dst[:kp*gemmNR])
	}
	if nr == 0 {
		return
	}
	if tB { // column j of op(b) is contiguous: its pairs come out of one conversion
		var u [gemmKC + 1]uint16 // u[kb] = 0: an odd kb's last high half
		for j := 0; j < nr; j++ {
			cvtBF16(u[:kb], b[(j0+j)*ldb+p0:(j0+j)*ldb+p0+kb], 1)
			for q := 0; q < kp; q++ {
				dst[q*gemmNR+j] = uint32(u[2*q]) | uint32(u[2*q+1])<<16
			}
		}
		return
	}
	var x, y [gemmNR]uint16
	for q := 0; q < kp; q++ {
		row := (p0+2*q)*ldb + j0
		cvtBF16(x[:nr], b[row:row+nr], 1)
		if 2*q+1 < kb {
			cvtBF16(y[:nr], b[row+ldb:row+ldb+nr], 1)
		} else {
			clear(y[:nr])
		}
		for j := 0; j < nr; j++ {
			dst[q*gemmNR+j] = uint32(x[j]) | uint32(y[j])<<16
		}
	}
}

// sbgemmFMA is sbgemm's product on the float32 kernels: op(a) and op(b) rounded to bfloat16
// into row-major copies whose k runs pair by pair odd value first (k padded to even with a
// zero), so the float32 kernel's FMA chain adds the products in VDPBF16PS's order.
func sbgemmFMA(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, bias []float32, c []float32, ldc int) {
	k2 := roundUp(k, 2)
	aBuf, bBuf := getBuf(m*k2), getBuf(k2*n)
	defer gemmPool.Put(aBuf)
	defer gemmPool.Put(bBuf)
	ar, br := *aBuf, *bBuf
	if k2 > k { // the pad of an odd k: a zero pair half
		for i := 0; i < m; i++ {
			ar[i*k2+k-1] = 0
		}
		clear(br[(k-1)*n : k*n])
	}
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			ix := i*lda + p
			if tA {
				ix = p*lda + i
			}
			ar[i*k2+p^1] = RoundBF16(alpha * a[ix])
		}
	}
	for p := 0; p < k; p++ {
		for j := 0; j < n; j++ {
			ix := p*ldb + j
			if tB {
				ix = j*ldb + p
			}
			br[(p^1)*n+j] = RoundBF16(b[ix])
		}
	}
	if bias != nil {
		sgemm32Bias(false, false, m, n, k2, ar, k2, br, n, bias, c, ldc)
		return
	}
	sgemm32(false, false, m, n, k2, 1, ar, k2, br, n, beta, c, ldc)
}
