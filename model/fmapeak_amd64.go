//go:build !noasm

package model

// fmaLoopAVX2 runs n iterations of 12 independent 256-bit (ymm) float32 FMAs.
//
//go:noescape
func fmaLoopAVX2(n int)

// fmaLoopAVX512 runs n iterations of 12 independent 512-bit (zmm) float32 FMAs.
//
//go:noescape
func fmaLoopAVX512(n int)

// fmaLoop returns the loop of vector width bits (256 or 512) if this CPU runs it.
func fmaLoop(width int) func(n int) {
	switch {
	case width == 256 && haveAVX2FMA:
		return fmaLoopAVX2
	case width == 512 && haveAVX512:
		return fmaLoopAVX512
	}
	return nil
}
