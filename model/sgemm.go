package model

import (
	"fmt"
	"runtime"
	"sync"
)

// A float32 matrix product in the GotoBLAS/BLIS scheme (Goto and van de
// Geijn, 2008): op(B) is packed in kc x nc blocks of 16-column panels, op(A)
// in mc x kc blocks of 6-row panels (scaled by alpha), and an assembly
// kernel (AVX2+FMA) multiplies one 6-row panel by one 16-column panel into a
// 6 x 16 block of C. On CPUs with AVX-512 (useAVX512) a second kernel takes
// two 6-row panels and two 16-column panels at once into a 12 x 32 block,
// the 6 x 16 kernel doing the edges; each element of C sums the same
// products in the same order in both kernels, so the two paths give the same
// bits. Row blocks run in parallel. Where the kernels are unavailable,
// gonum's Sgemm does the work; with the build tag openblas, OpenBLAS does
// (sgemmExt).
const (
	gemmMR = 6
	gemmNR = 16
	gemmKC = 256
	gemmMC = 120 // a multiple of gemmMR and gemmZMR
	gemmNC = 1024

	gemmZMR = 2 * gemmMR // the AVX-512 kernel's block of C
	gemmZNR = 2 * gemmNR
)

var gemmPool = sync.Pool{New: func() any { return new([]float32) }}

var u32Pool = sync.Pool{New: func() any { return new([]uint32) }}

func getBuf(n int) *[]float32   { return pooled[float32](&gemmPool, n) }
func getBufU32(n int) *[]uint32 { return pooled[uint32](&u32Pool, n) }

// pooled takes a buffer of n elements from pool (of *[]T), growing it if needed.
func pooled[T any](pool *sync.Pool, n int) *[]T {
	p := pool.Get().(*[]T)
	if cap(*p) < n {
		*p = make([]T, n)
	}
	*p = (*p)[:n]
	return p
}

// sgemm computes c = alpha*op(a)*op(b) + beta*c, row-major, op(a) m x k,
// op(b) k x n, as BLAS Sgemm, with the products' precision of
// SetMatmulPrecision (bf16.go).
func sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if bf16Products() {
		sbgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, nil, c, ldc)
		return
	}
	sgemm32(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemm32 is sgemm with float32 products.
func sgemm32(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if sgemmExt != nil || !haveAVX2FMA {
		sgemmGeneric(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemmAsm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, nil, c, ldc)
}

// sgemmBias computes c = op(a)*op(b) + bias, bias (n values) added to every
// row of c, with the products' precision of SetMatmulPrecision.
func sgemmBias(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, bias []float32, c []float32, ldc int) {
	if bf16Products() && k > 0 {
		sbgemm(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, bias[:n], c, ldc)
		return
	}
	sgemm32Bias(tA, tB, m, n, k, a, lda, b, ldb, bias, c, ldc)
}

// sgemm32Bias is sgemmBias with float32 products.
func sgemm32Bias(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, bias []float32, c []float32, ldc int) {
	if sgemmExt != nil || !haveAVX2FMA || k == 0 {
		for i := 0; i < m; i++ {
			copy(c[i*ldc:i*ldc+n], bias)
		}
		sgemmGeneric(tA, tB, m, n, k, 1, a, lda, b, ldb, 1, c, ldc)
		return
	}
	sgemmAsm(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, bias[:n], c, ldc)
}

// sgemmAsm is sgemm with the assembly kernel; a non-nil bias requires
// beta = 0, k > 0 and alpha != 0.
func sgemmAsm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, bias []float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	checkGemms(tA, tB, m, n, k, a, lda, b, ldb, c, ldc)
	// With beta = 0 the first k block overwrites c (no clearing pass).
	overwrite := prepareC(m, n, k, alpha, beta, c, ldc)
	if k == 0 || alpha == 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if m*n*k < 1<<21 {
		workers = 1
	}
	wide := useAVX512
	mr := gemmMR
	if wide {
		mr = gemmZMR
	}
	// Row blocks: at most gemmMC rows, at least one block per worker.
	mc := min(gemmMC, roundUp((m+workers-1)/workers, mr))
	nBlocks := (m + mc - 1) / mc

	bBuf := getBuf(gemmKC * roundUp(min(n, gemmNC), gemmNR))
	defer gemmPool.Put(bBuf)
	bp := *bBuf
	for jc := 0; jc < n; jc += gemmNC {
		nb := min(gemmNC, n-jc)
		for pc := 0; pc < k; pc += gemmKC {
			kb := min(gemmKC, k-pc)
			panels := (nb + gemmNR - 1) / gemmNR
			packWork := kb * gemmNR
			if workers == 1 {
				packWork = 0
			}
			parallelFor(panels, packWork, func(lo, hi int) {
				for jp := lo; jp < hi; jp++ {
					packB(bp[jp*kb*gemmNR:(jp+1)*kb*gemmNR], b, ldb, tB, pc, kb, jc+jp*gemmNR, min(gemmNR, nb-jp*gemmNR))
				}
			})
			blockWork := mc * nb * kb
			if workers == 1 {
				blockWork = 0
			}
			parallelFor(nBlocks, blockWork, func(lo, hi int) {
				aBuf := getBuf(mc * kb)
				defer gemmPool.Put(aBuf)
				ap := *aBuf
				var tmp [gemmMR * gemmNR]float32
				for blk := lo; blk < hi; blk++ {
					ic := blk * mc
					mb := min(mc, m-ic)
					packA(ap, a, lda, tA, ic, mb, pc, kb, alpha)
					add := !overwrite || pc > 0
					// block computes the (possibly partial) 6 x 16 block of
					// c at rows ic+ir, columns jc+jr.
					block := func(ir, jr int) {
						mr, nr := min(gemmMR, mb-ir), min(gemmNR, nb-jr)
						bPanel := bp[(jr/gemmNR)*kb*gemmNR:]
						aPanel := ap[(ir/gemmMR)*kb*gemmMR:]
						ci := (ic+ir)*ldc + jc + jr
						var bb []float32 // bias of these columns, first k block only
						if bias != nil && !add {
							bb = bias[jc+jr : jc+jr+nr]
						}
						if mr == gemmMR && nr == gemmNR {
							var bp *float32
							if bb != nil {
								bp = &bb[0]
							}
							sgemmKernel6x16(kb, &aPanel[0], &bPanel[0], &c[ci], ldc, bp, add)
							return
						}
						sgemmKernel6x16(kb, &aPanel[0], &bPanel[0], &tmp[0], gemmNR, nil, false)
						mergeBlock(c[ci:], ldc, tmp[:], gemmNR, mr, nr, add, bb)
					}
					if !wide {
						for jr := 0; jr < nb; jr += gemmNR {
							for ir := 0; ir < mb; ir += gemmMR {
								block(ir, jr)
							}
						}
						continue
					}
					// The AVX-512 kernel on whole 12 x 32 blocks, block on the
					// edges.
					for jr := 0; jr < nb; jr += gemmZNR {
						for ir := 0; ir < mb; ir += gemmZMR {
							if mb-ir < gemmZMR || nb-jr < gemmZNR {
								for jj := jr; jj < min(jr+gemmZNR, nb); jj += gemmNR {
									for ii := ir; ii < min(ir+gemmZMR, mb); ii += gemmMR {
										block(ii, jj)
									}
								}
								continue
							}
							var bb *float32
							if bias != nil && !add {
								bb = &bias[jc+jr]
							}
							sgemmKernel12x32AVX512(kb, &ap[(ir/gemmMR)*kb*gemmMR], kb*gemmMR, &bp[(jr/gemmNR)*kb*gemmNR], kb*gemmNR, &c[(ic+ir)*ldc+jc+jr], ldc, bb, add)
						}
					}
				}
			})
		}
	}
}

// pickAVX512 reports whether a CPU with both GEMM kernels uses the AVX-512
// one, given RAGTRAIN_KERNEL (env) and whether the CPU is a Zen 4 (see
// useAVX512).
func pickAVX512(env string, zen4 bool) bool {
	switch env {
	case "avx2":
		return false
	case "avx512":
		return true
	}
	return !zen4
}

// pickBF16 reports whether a CPU with VDPBF16PS uses it for bfloat16 products, given
// RAGTRAIN_KERNEL (env): "avx2" and "avx512" force a float32 kernel (see useBF16Kernel).
func pickBF16(env string) bool { return env != "avx2" && env != "avx512" }

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// checkGemms checks the three operands of a product (checkGemm).
func checkGemms(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	checkGemm(tA, m, k, a, lda, "a")
	checkGemm(tB, k, n, b, ldb, "b")
	checkGemm(false, m, n, c, ldc, "c")
}

// checkGemm panics, as BLAS does, when a row-major operand op(x) of r rows
// and c columns does not fit in x with leading dimension ld (the kernel
// does not check bounds).
func checkGemm(t bool, r, c int, x []float32, ld int, name string) {
	if t {
		r, c = c, r
	}
	if r == 0 || c == 0 {
		return
	}
	if ld < c || len(x) < (r-1)*ld+c {
		panic(fmt.Sprintf("model: sgemm: %s has %d elements and leading dimension %d, too few for %d x %d", name, len(x), ld, r, c))
	}
}

// packA packs rows i0..i0+mb-1, columns p0..p0+kb-1 of op(a), times alpha,
// into 6-row panels: dst[panel*kb*6 + p*6 + r]; rows past mb are zero.
func packA(dst, a []float32, lda int, tA bool, i0, mb, p0, kb int, alpha float32) {
	for ir := 0; ir < mb; ir += gemmMR {
		panel := dst[(ir/gemmMR)*kb*gemmMR : (ir/gemmMR+1)*kb*gemmMR]
		mr := min(gemmMR, mb-ir)
		if mr < gemmMR {
			clear(panel)
		}
		if tA {
			if mr == gemmMR {
				for p := 0; p < kb; p++ {
					src := (*[gemmMR]float32)(a[(p0+p)*lda+i0+ir:])
					d := (*[gemmMR]float32)(panel[p*gemmMR:])
					d[0], d[1], d[2] = alpha*src[0], alpha*src[1], alpha*src[2]
					d[3], d[4], d[5] = alpha*src[3], alpha*src[4], alpha*src[5]
				}
				continue
			}
			for p := 0; p < kb; p++ {
				src := a[(p0+p)*lda+i0+ir : (p0+p)*lda+i0+ir+mr]
				d := panel[p*gemmMR : p*gemmMR+mr]
				for r, v := range src {
					d[r] = alpha * v
				}
			}
			continue
		}
		if mr == gemmMR {
			row := func(r int) []float32 { return a[(i0+ir+r)*lda+p0 : (i0+ir+r)*lda+p0+kb] }
			r0, r1, r2, r3, r4, r5 := row(0), row(1), row(2), row(3), row(4), row(5)
			// AVX2 for columns in groups of 8 (pack_amd64.s), Go for the rest.
			done := packA6Vec(panel, a[(i0+ir)*lda+p0:], lda, kb, alpha)
			r0, r1, r2, r3, r4, r5 = r0[done:], r1[done:], r2[done:], r3[done:], r4[done:], r5[done:]
			r1, r2, r3, r4, r5 = r1[:len(r0)], r2[:len(r0)], r3[:len(r0)], r4[:len(r0)], r5[:len(r0)]
			panel := panel[done*gemmMR : kb*gemmMR]
			for p, v0 := range r0 {
				d := (*[gemmMR]float32)(panel[p*gemmMR:])
				d[0], d[1], d[2] = alpha*v0, alpha*r1[p], alpha*r2[p]
				d[3], d[4], d[5] = alpha*r3[p], alpha*r4[p], alpha*r5[p]
			}
			continue
		}
		for r := 0; r < mr; r++ {
			src := a[(i0+ir+r)*lda+p0 : (i0+ir+r)*lda+p0+kb]
			for p, v := range src {
				panel[p*gemmMR+r] = alpha * v
			}
		}
	}
}

// packB packs rows p0..p0+kb-1, columns j0..j0+nr-1 (nr <= 16) of op(b)
// into one 16-column panel: dst[p*16 + j]; columns past nr are zero.
func packB(dst, b []float32, ldb int, tB bool, p0, kb, j0, nr int) {
	if nr < gemmNR {
		clear(dst)
	}
	if tB {
		for j := 0; j < nr; j++ {
			src := b[(j0+j)*ldb+p0 : (j0+j)*ldb+p0+kb]
			for p, v := range src {
				dst[p*gemmNR+j] = v
			}
		}
		return
	}
	for p := 0; p < kb; p++ {
		copy(dst[p*gemmNR:p*gemmNR+nr], b[(p0+p)*ldb+j0:(p0+p)*ldb+j0+nr])
	}
}
