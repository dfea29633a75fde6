//go:build !noasm

package model

//go:noescape
func softmaxExpAVX2(out, x, m *float32, n int, shift float32, c *uint32) (sum float32)

// softmaxExpVec sets out[j] = m[j]·e^min(x[j]-shift, 0) on the first
// len(x) &^ 7 elements and returns how many it did and their sum.
func softmaxExpVec(out, x, m []float32, shift float32) (int, float32) {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0, 0
	}
	_, _ = out[n-1], m[n-1]
	return n, softmaxExpAVX2(&out[0], &x[0], &m[0], n, shift, &geluConsts[0])
}
