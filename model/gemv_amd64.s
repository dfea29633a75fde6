//go:build !noasm

#include "textflag.h"

// REDUCE4 stores at dst the four sums of the 8-lane accumulators a..d (ya..yd as Y registers,
// xa..xd the same as X registers): the upper and lower halves added, then the lanes pairwise
// (VHADDPS), using the X registers t0..t3.
#define REDUCE4(ya, yb, yc, yd, xa, xb, xc, xd, t0, t1, t2, t3, dst) \
	VEXTRACTF128 $1, ya, t0 \
	VADDPS       t0, xa, xa \
	VEXTRACTF128 $1, yb, t1 \
	VADDPS       t1, xb, xb \
	VEXTRACTF128 $1, yc, t2 \
	VADDPS       t2, xc, xc \
	VEXTRACTF128 $1, yd, t3 \
	VADDPS       t3, xd, xd \
	VHADDPS      xb, xa, xa \
	VHADDPS      xd, xc, xc \
	VHADDPS      xc, xa, xa \
	VMOVUPS      xa, dst

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

	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, X4, X5, X6, X7, (R8))
	VZEROUPPER
	RET

// func dot4x2AVX2(x, w *float32, ldx, ldw, n int, out *float32)
// dot4AVX2 for two rows of x at once (x and x+ldx): out[r] for row 0, out[4+r] for row 1. Each
// of the eight sums is accumulated and reduced exactly as dot4AVX2 does it (the same bits); the
// eight independent FMA chains keep both FMA units busy where dot4AVX2's four wait on latency.
TEXT ·dot4x2AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldx+16(FP), BX
	SHLQ $2, BX
	ADDQ SI, BX
	MOVQ ldw+24(FP), DX
	SHLQ $2, DX
	MOVQ n+32(FP), CX
	MOVQ out+40(FP), R8
	LEAQ (DI)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX

loop2:
	VMOVUPS (SI)(AX*4), Y8
	VMOVUPS (BX)(AX*4), Y9
	VMOVUPS (DI)(AX*4), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS (R9)(AX*4), Y11
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS (R10)(AX*4), Y12
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y9, Y6
	VMOVUPS (R11)(AX*4), Y13
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y13, Y9, Y7
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  loop2

	REDUCE4(Y0, Y1, Y2, Y3, X0, X1, X2, X3, X8, X9, X10, X11, (R8))
	REDUCE4(Y4, Y5, Y6, Y7, X4, X5, X6, X7, X8, X9, X10, X11, 16(R8))
	VZEROUPPER
	RET
