//go:build !amd64 || noasm

package model

const (
	haveAVX2FMA = false
	haveAVX512  = false
)

var useAVX512 = false

const haveBF16 = false

var useBF16Kernel = false

func isZen4() bool { return false }

func sgemmKernel6x16(k int, a, b, c *float32, ldc int, bias *float32, add bool) {
	panic("model: no sgemm kernel on this platform")
}

func sgemmKernel12x32AVX512(k int, a *float32, aStride int, b *float32, bStride int, c *float32, ldc int, bias *float32, add bool) {
	panic("model: no sgemm kernel on this platform")
}

func sbgemmKernel12x32BF16(kp int, a *uint32, aStride int, b *uint32, bStride int, c *float32, ldc int, bias *float32, add bool) {
	panic("model: no bf16 kernel on this platform")
}

func cvtBF16x16(dst *uint16, src *float32, n int, alpha float32) {
	panic("model: no bf16 conversion kernel on this platform")
}

func geluVec(out, x []float32) int        { return 0 }
func geluGradVec(out, x, g []float32) int { return 0 }

func fmaLoop(width int) func(n int) { return nil }
