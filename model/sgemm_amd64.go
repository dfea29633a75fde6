//go:build !noasm

package model

import (
	"os"

	"golang.org/x/sys/cpu"
)

//go:generate go run gen_sgemm512.go -o sgemm512_amd64.s
//go:generate go run gen_sgemm512.go -bf16 -o sbgemm512_amd64.s

// haveAVX2FMA reports whether the assembly kernels can run.
var haveAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// haveAVX512 reports whether the AVX-512 GEMM kernel can run: the CPU has
// AVX-512F and the OS saves the zmm registers (x/sys/cpu checks both).
var haveAVX512 = haveAVX2FMA && cpu.X86.HasAVX512F

// useAVX512 selects the AVX-512 GEMM kernel (sgemmKernel12x32AVX512) over
// the AVX2 one. Both give the same bits, so the choice is one of speed:
// the AVX-512 kernel where the CPU has it, except on AMD Zen 4, which splits
// each 512-bit FMA into two 256-bit halves (no more flops per cycle than
// AVX2) and where the 12 x 32 block's 32 KB of packed B fills the 32 KB L1
// cache; measured there, the AVX2 kernel was a few per cent faster.
// RAGTRAIN_KERNEL=avx2 or =avx512 in the environment forces one path (the
// AVX-512 one only where the CPU has it), for tests and benchmarks of both.
var useAVX512 = haveAVX512 && pickAVX512(os.Getenv("RAGTRAIN_KERNEL"), isZen4())

// haveBF16 reports whether the CPU has AVX512-BF16 (VDPBF16PS) besides AVX-512F.
var haveBF16 = haveAVX512 && cpu.X86.HasAVX512BF16

// useBF16Kernel selects VDPBF16PS (sbgemmKernel12x32BF16) for bfloat16 products where the CPU
// has it; RAGTRAIN_KERNEL=avx2 or =avx512 forces the float32 kernel of that name for them too
// (the same bits but for subnormal partial sums; bf16.go), for tests and benchmarks of both.
var useBF16Kernel = haveBF16 && pickBF16(os.Getenv("RAGTRAIN_KERNEL"))

// isZen4 reports whether the CPU is an AMD family 19h part (Zen 3 and Zen
// 4; of those only Zen 4 has AVX-512). x/sys/cpu does not give the family.
func isZen4() bool {
	_, b, c, d := cpuid(0, 0)
	if b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163 { // "AuthenticAMD"
		return false
	}
	a, _, _, _ := cpuid(1, 0)
	family := a >> 8 & 0xf
	if family == 0xf {
		family += a >> 20 & 0xff
	}
	return family == 0x19
}

//go:noescape
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// sgemmKernel6x16 adds (add) or writes the product of a packed 6 x k panel
// a and a packed k x 16 panel b to the 6 x 16 block of c at c (row stride
// ldc), k >= 1. When writing, it adds bias[0..15] (if not nil) to each row.
//
//go:noescape
func sgemmKernel6x16(k int, a, b, c *float32, ldc int, bias *float32, add bool)

// sgemmKernel12x32AVX512 is sgemmKernel6x16 on a 12 x 32 block of c: two
// packed 6-row panels of A (the second aStride floats after a) times two
// packed 16-column panels of B (bStride floats apart), with bias[0..31].
// Each element sums its k products in the same order as sgemmKernel6x16
// (sgemm512_amd64.s, written by gen_sgemm512.go).
//
// sbgemmKernel12x32BF16 is sgemmKernel12x32AVX512 on kp pairs of k, the packed operands holding
// bfloat16 pairs (packBBF16's panels of B; A's 12 rows row-major, aStride pairs apart:
// packABF16), with VDPBF16PS (sbgemm512_amd64.s, written by gen_sgemm512.go -bf16).
//
//go:noescape
func sbgemmKernel12x32BF16(kp int, a *uint32, aStride int, b *uint32, bStride int, c *float32, ldc int, bias *float32, add bool)

// cvtBF16x16 sets dst[i] = bfloat16(alpha·src[i]) for i < n, n a multiple of 16, with
// VCVTNEPS2BF16 (bf16_amd64.s; AVX512-BF16 only).
//
//go:noescape
func cvtBF16x16(dst *uint16, src *float32, n int, alpha float32)

//go:noescape
func sgemmKernel12x32AVX512(k int, a *float32, aStride int, b *float32, bStride int, c *float32, ldc int, bias *float32, add bool)
