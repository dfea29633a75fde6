//go:build !noasm

#include "textflag.h"

// func dot4AVX2(x, w *float32, ldw, n int, out *float32)
// out[r] = Σ_{i<n} x[i]·w[r·ldw+i] for the four rows r = 0..3 of w, n a positive multiple of
// 8, each sum in 8 float32 lanes (FMA), the lanes then added pairwise.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldw+16(FP), DX
	SHLQ $2, DX
	MOVQ n+24(FP), CX
	MOVQ out+32(FP), R8
	LEAQ (DI)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX

loop:
	VMOVUPS (SI)(AX*4), Y4
	VFMADD231PS (DI)(AX*4), Y4, Y0
	VFMADD231PS (R9)(AX*4), Y4, Y1
	VFMADD231PS (R10)(AX*4), Y4, Y2
	VFMADD231PS (R11)(AX*4), Y4, Y3
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  loop

	VEXTRACTF128 $1, Y0, X4
	VADDPS       X4, X0, X0
	VEXTRACTF128 $1, Y1, X5
	VADDPS       X5, X1, X1
	VEXTRACTF128 $1, Y2, X6
	VADDPS       X6, X2, X2
	VEXTRACTF128 $1, Y3, X7
	VADDPS       X7, X3, X3
	VHADDPS      X1, X0, X0
	VHADDPS      X3, X2, X2
	VHADDPS      X2, X0, X0
	VMOVUPS      X0, (R8)
	VZEROUPPER
	RET
