//go:build !noasm

#include "textflag.h"

// func cvtBF16x16(dst *uint16, src *float32, n int, alpha float32)
//
// dst[i] = bfloat16(alpha * src[i]) for i < n, n a multiple of 16: VMULPS, then VCVTNEPS2BF16
// (AVX512-BF16; round to nearest even, a subnormal to a zero of its sign, NaN quiet: toBF16's
// rounding). Go's assembler has no mnemonic for VCVTNEPS2BF16: its EVEX bytes are written out
// (EVEX.512.F3.0F38.W0 72 /r, checked against GNU as).
TEXT ·cvtBF16x16(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS alpha+24(FP), Z2
	SHRQ $4, CX
	JZ   done

loop:
	VMULPS (SI), Z2, Z0
	BYTE $0x62; BYTE $0xF2; BYTE $0x7E; BYTE $0x48; BYTE $0x72; BYTE $0xC8 // VCVTNEPS2BF16 Z0, Y1
	VMOVDQU Y1, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop

done:
	VZEROUPPER
	RET
