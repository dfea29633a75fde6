//go:build !noasm

#include "textflag.h"

// func softmaxExpAVX2(out, x, m *float32, mstep, n int, shift float32, c *uint32) (sum float32)
// out[i] = m[i] exp(min(x[i] - shift, 0)) for i < n, n a multiple of 8, and
// sum = Σ out[i]; the mask pointer advances mstep bytes per 8 elements (32:
// a mask per element; 0: the same 8 values throughout). The exponential is gelu_amd64.s's (constants geluConsts:
// 68 -87, 72 log2(e), 76 ln2 high, 80 ln2 low, 84..108 1/7!..1, 116 int32
// 127): x = k ln2 + r, e^r by its degree-7 Taylor polynomial, times 2^k.
// Clamping the argument at 0 keeps masked entries (m = 0) finite.
TEXT ·softmaxExpAVX2(SB), NOSPLIT, $0-60
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ m+16(FP), R8
	MOVQ mstep+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSS shift+40(FP), Y8
	MOVQ c+48(FP), DX
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VBROADCASTSS 68(DX), Y11
	VBROADCASTSS 72(DX), Y12
	VBROADCASTSS 76(DX), Y13
	VBROADCASTSS 80(DX), Y14
	SHRQ $3, CX
	JZ   sdone

sloop:
	// Y5 = max(min(x - shift, 0), -87)
	VMOVUPS (SI), Y5
	VSUBPS  Y8, Y5, Y5
	VMINPS  Y10, Y5, Y5
	VMAXPS  Y11, Y5, Y5
	// Y6 = k = round(Y5 log2 e); Y5 = r = Y5 - k ln2
	VMULPS      Y12, Y5, Y6
	VROUNDPS    $0, Y6, Y6
	VFNMADD231PS Y13, Y6, Y5
	VFNMADD231PS Y14, Y6, Y5
	// Y7 = e^r
	VBROADCASTSS 84(DX), Y7
	VBROADCASTSS 88(DX), Y15
	VFMADD213PS  Y15, Y5, Y7
	VBROADCASTSS 92(DX), Y15
	VFMADD213PS  Y15, Y5, Y7
	VBROADCASTSS 96(DX), Y15
	VFMADD213PS  Y15, Y5, Y7
	VBROADCASTSS 100(DX), Y15
	VFMADD213PS  Y15, Y5, Y7
	VBROADCASTSS 104(DX), Y15
	VFMADD213PS  Y15, Y5, Y7
	VBROADCASTSS 108(DX), Y15
	VFMADD213PS  Y15, Y5, Y7
	VFMADD213PS  Y15, Y5, Y7
	// Y7 *= 2^k, then the mask
	VCVTPS2DQ    Y6, Y6
	VPBROADCASTD 116(DX), Y15
	VPADDD       Y15, Y6, Y6
	VPSLLD       $23, Y6, Y6
	VMULPS       Y6, Y7, Y7
	VMULPS       (R8), Y7, Y7
	VMOVUPS      Y7, (DI)
	VADDPS       Y7, Y9, Y9
	ADDQ $32, SI
	ADDQ R9, R8
	ADDQ $32, DI
	DECQ CX
	JNZ  sloop

sdone:
	VEXTRACTF128 $1, Y9, X0
	VADDPS       X9, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, sum+56(FP)
	VZEROUPPER
	RET

// func maskedMaxAVX2(x, m *float32, mstep, n int, negInf *float32) float32
// The largest x[i] over i < n with m[i] != 0 (n a multiple of 8), -Inf when
// there is none; mstep as in softmaxExpAVX2.
TEXT ·maskedMaxAVX2(SB), NOSPLIT, $0-44
	MOVQ x+0(FP), SI
	MOVQ m+8(FP), R8
	MOVQ mstep+16(FP), R9
	MOVQ n+24(FP), CX
	MOVQ negInf+32(FP), DX
	VBROADCASTSS (DX), Y9
	VMOVAPS Y9, Y8
	VXORPS  Y10, Y10, Y10
	SHRQ $3, CX
	JZ   mdone

mloop:
	VMOVUPS   (SI), Y0
	VMOVUPS   (R8), Y1
	VCMPPS    $0, Y10, Y1, Y2
	VBLENDVPS Y2, Y9, Y0, Y0
	VMAXPS    Y0, Y8, Y8
	ADDQ $32, SI
	ADDQ R9, R8
	DECQ CX
	JNZ  mloop

mdone:
	VEXTRACTF128 $1, Y8, X0
	VMAXPS       X8, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VMOVSS       X0, ret+40(FP)
	VZEROUPPER
	RET
