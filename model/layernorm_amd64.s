//go:build !noasm

#include "textflag.h"

// func layerNormRowAVX2(out, x, gamma, beta *float32, h int, eps float32)
// out = (x - mean) / sqrt(var + eps) * gamma + beta over one row of h
// values, h a positive multiple of 8, accumulated in 8 float32 lanes: pass 1
// gives the mean m1; pass 2 sums d = x - m1 and d², so the mean is m1 + c
// with c = Σd/h and the biased variance Σd²/h - c²; pass 3 subtracts m1, then
// c, which keeps rows with a large common offset accurate.
TEXT ·layerNormRowAVX2(SB), NOSPLIT, $0-44
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gamma+16(FP), R8
	MOVQ beta+24(FP), R9
	MOVQ h+32(FP), CX
	SHRQ $3, CX
	// n = h as float32, broadcast
	MOVQ h+32(FP), AX
	CVTSQ2SS AX, X14
	VBROADCASTSS X14, Y14

	// pass 1: the sum
	VXORPS Y0, Y0, Y0
	MOVQ SI, R10
	MOVQ CX, R11
l1:
	VADDPS (R10), Y0, Y0
	ADDQ $32, R10
	DECQ R11
	JNZ  l1
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VDIVSS       X14, X0, X0
	VBROADCASTSS X0, Y13 // m1

	// pass 2: Σd in Y2, Σd² in Y0, d = x - m1
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	MOVQ SI, R10
	MOVQ CX, R11
l2:
	VMOVUPS     (R10), Y1
	VSUBPS      Y13, Y1, Y1
	VADDPS      Y1, Y2, Y2
	VFMADD231PS Y1, Y1, Y0
	ADDQ $32, R10
	DECQ R11
	JNZ  l2
	// X2 = c = Σd/h
	VEXTRACTF128 $1, Y2, X1
	VADDPS       X1, X2, X2
	VMOVHLPS     X2, X2, X1
	VADDPS       X1, X2, X2
	VMOVSHDUP    X2, X1
	VADDSS       X1, X2, X2
	VDIVSS       X14, X2, X2
	VBROADCASTSS X2, Y11 // c
	// X0 = Σd²/h - c²
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VDIVSS       X14, X0, X0
	VFNMADD231SS X2, X2, X0
	VADDSS       eps+40(FP), X0, X0
	VSQRTSS      X0, X0, X0
	MOVL         $0x3f800000, AX // 1.0
	MOVL         AX, X1
	VDIVSS       X0, X1, X0
	VBROADCASTSS X0, Y12 // rstd

	// pass 3: normalise, scale, shift
l3:
	VMOVUPS     (SI), Y1
	VSUBPS      Y13, Y1, Y1
	VSUBPS      Y11, Y1, Y1
	VMULPS      Y12, Y1, Y1
	VMULPS      (R8), Y1, Y1
	VADDPS      (R9), Y1, Y1
	VMOVUPS     Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, DI
	DECQ CX
	JNZ  l3
	VZEROUPPER
	RET
