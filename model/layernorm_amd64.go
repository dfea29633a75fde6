//go:build !noasm

package model

//go:noescape
func layerNormRowAVX2(out, x, gamma, beta *float32, h int, eps float32)

// layerNormRowVec normalises one float32 row as layerNorm does, in AVX2,
// when len(x) is a multiple of 8; it reports whether it did.
func layerNormRowVec(out, x, gamma, beta []float32, eps float64) bool {
	h := len(x)
	if !haveAVX2FMA || h == 0 || h%8 != 0 || len(out) < h || len(gamma) < h || len(beta) < h {
		return false
	}
	layerNormRowAVX2(&out[0], &x[0], &gamma[0], &beta[0], h, float32(eps))
	return true
}
