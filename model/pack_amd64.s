//go:build !noasm

#include "textflag.h"

// func packA6AVX2(dst, a *float32, lda, kb int, alpha float32)
// Packs a 6-row panel of a row-major matrix for sgemmKernel6x16:
// dst[p*6 + r] = alpha * a[r*lda + p] for r < 6 and p < kb, kb a multiple
// of 8. Each step loads 8 columns of the 6 rows and transposes them with
// unpack and shuffle (rows 0-3 in s0..s3, rows 4-5 in t4, t5), then stores
// the 8 groups of 6.
TEXT ·packA6AVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), BX
	SHLQ $2, BX
	MOVQ kb+24(FP), CX
	VBROADCASTSS alpha+32(FP), Y15
	LEAQ (SI)(BX*1), R8
	LEAQ (SI)(BX*2), R9
	LEAQ (R8)(BX*2), R10
	LEAQ (SI)(BX*4), R11
	LEAQ (R8)(BX*4), R12
	XORQ R13, R13
	SHRQ $3, CX
	JZ   pdone

ploop:
	VMULPS (SI)(R13*1), Y15, Y0
	VMULPS (R8)(R13*1), Y15, Y1
	VMULPS (R9)(R13*1), Y15, Y2
	VMULPS (R10)(R13*1), Y15, Y3
	VMULPS (R11)(R13*1), Y15, Y4
	VMULPS (R12)(R13*1), Y15, Y5
	VUNPCKLPS Y1, Y0, Y6
	VUNPCKHPS Y1, Y0, Y7
	VUNPCKLPS Y3, Y2, Y8
	VUNPCKHPS Y3, Y2, Y9
	VUNPCKLPS Y5, Y4, Y10
	VUNPCKHPS Y5, Y4, Y11
	VSHUFPS $0x44, Y8, Y6, Y0
	VSHUFPS $0xEE, Y8, Y6, Y1
	VSHUFPS $0x44, Y9, Y7, Y2
	VSHUFPS $0xEE, Y9, Y7, Y3
	// columns 0..3: the low 128-bit lanes
	VMOVUPS X0, 0(DI)
	VMOVLPS X10, 16(DI)
	VMOVUPS X1, 24(DI)
	VMOVHPS X10, 40(DI)
	VMOVUPS X2, 48(DI)
	VMOVLPS X11, 64(DI)
	VMOVUPS X3, 72(DI)
	VMOVHPS X11, 88(DI)
	// columns 4..7: the high lanes
	VEXTRACTF128 $1, Y0, X0
	VEXTRACTF128 $1, Y10, X10
	VMOVUPS X0, 96(DI)
	VMOVLPS X10, 112(DI)
	VEXTRACTF128 $1, Y1, X1
	VMOVUPS X1, 120(DI)
	VMOVHPS X10, 136(DI)
	VEXTRACTF128 $1, Y2, X2
	VEXTRACTF128 $1, Y11, X11
	VMOVUPS X2, 144(DI)
	VMOVLPS X11, 160(DI)
	VEXTRACTF128 $1, Y3, X3
	VMOVUPS X3, 168(DI)
	VMOVHPS X11, 184(DI)
	ADDQ $192, DI
	ADDQ $32, R13
	DECQ CX
	JNZ  ploop

pdone:
	VZEROUPPER
	RET
