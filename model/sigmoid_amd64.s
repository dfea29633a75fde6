//go:build !noasm

#include "textflag.h"

// The constants of math.Exp (Go's src/math/exp_amd64.s, after Shibata's SLEEF), same literals.
DATA sigc<>+0(SB)/8, $0.5
DATA sigc<>+8(SB)/8, $1.0
DATA sigc<>+16(SB)/8, $2.0
DATA sigc<>+24(SB)/8, $1.6666666666666666667e-1
DATA sigc<>+32(SB)/8, $4.1666666666666666667e-2
DATA sigc<>+40(SB)/8, $8.3333333333333333333e-3
DATA sigc<>+48(SB)/8, $1.3888888888888888889e-3
DATA sigc<>+56(SB)/8, $1.9841269841269841270e-4
DATA sigc<>+64(SB)/8, $2.4801587301587301587e-5
DATA sigc<>+72(SB)/8, $1.4426950408889634073599246810018920
DATA sigc<>+80(SB)/8, $0.69314718055966295651160180568695068359375
DATA sigc<>+88(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA sigc<>+96(SB)/8, $0.0625
DATA sigc<>+104(SB)/8, $0x3FF
DATA sigc<>+112(SB)/8, $0x8000000000000000
GLOBL sigc<>+0(SB), RODATA, $120

// func sigmoid4AVX2(s *float64, n int)
// s[i] = 1 / (1 + exp(-s[i])) for i < n (a positive multiple of 4), every s[i] in [-700, 700]:
// exp is math.Exp's FMA path (the one it takes on a CPU with AVX and FMA) on four lanes, the
// same operations in the same order, so each result is the bits of Go's 1 / (1 + math.Exp(-z)).
TEXT ·sigmoid4AVX2(SB), NOSPLIT, $0-16
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD sigc<>+112(SB), Y15 // sign bit
	VBROADCASTSD sigc<>+72(SB), Y14  // LOG2E
	VBROADCASTSD sigc<>+80(SB), Y13  // LN2U
	VBROADCASTSD sigc<>+88(SB), Y12  // LN2L
	VBROADCASTSD sigc<>+96(SB), Y11  // 0.0625
	VBROADCASTSD sigc<>+8(SB), Y10   // 1
	VBROADCASTSD sigc<>+16(SB), Y9   // 2
	VBROADCASTSD sigc<>+104(SB), Y8  // 0x3FF
	XORQ AX, AX

loop:
	VMOVUPD (SI)(AX*8), Y0
	VXORPD  Y15, Y0, Y0 // x = -z
	VMULPD  Y14, Y0, Y1 // LOG2E·x
	VCVTPD2DQY Y1, X1   // exponent (round to nearest)
	VCVTDQ2PD X1, Y2
	VFNMADD231PD Y13, Y2, Y0
	VFNMADD231PD Y12, Y2, Y0
	VMULPD  Y11, Y0, Y0
	VBROADCASTSD sigc<>+64(SB), Y3
	VBROADCASTSD sigc<>+56(SB), Y4
	VFMADD213PD Y4, Y0, Y3
	VBROADCASTSD sigc<>+48(SB), Y4
	VFMADD213PD Y4, Y0, Y3
	VBROADCASTSD sigc<>+40(SB), Y4
	VFMADD213PD Y4, Y0, Y3
	VBROADCASTSD sigc<>+32(SB), Y4
	VFMADD213PD Y4, Y0, Y3
	VBROADCASTSD sigc<>+24(SB), Y4
	VFMADD213PD Y4, Y0, Y3
	VBROADCASTSD sigc<>+0(SB), Y4
	VFMADD213PD Y4, Y0, Y3
	VFMADD213PD Y10, Y0, Y3
	VMULPD  Y3, Y0, Y0
	VADDPD  Y9, Y0, Y3
	VMULPD  Y3, Y0, Y0
	VADDPD  Y9, Y0, Y3
	VMULPD  Y3, Y0, Y0
	VADDPD  Y9, Y0, Y3
	VMULPD  Y3, Y0, Y0
	VADDPD  Y9, Y0, Y3
	VFMADD213PD Y10, Y3, Y0
	VPMOVSXDQ X1, Y5    // 2^exponent
	VPADDQ  Y8, Y5, Y5
	VPSLLQ  $52, Y5, Y5
	VMULPD  Y5, Y0, Y0  // exp(x)
	VADDPD  Y10, Y0, Y0 // 1 + exp(-z)
	VDIVPD  Y0, Y10, Y0 // 1 / (1 + exp(-z))
	VMOVUPD Y0, (SI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, CX
	JLT  loop
	VZEROUPPER
	RET
