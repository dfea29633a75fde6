//go:build !noasm

package model

//go:noescape
func dot4AVX2(x, w *float32, ldw, n int, out *float32)

// dot4Vec sets out[r] = x · w[r·ldw : r·ldw+len(x)] for r < 4 over the first len(x) &^ 7
// values in AVX2 and returns that count (0 without AVX2).
func dot4Vec(out *[4]float32, x, w []float32, ldw int) int {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0
	}
	_ = w[3*ldw+n-1]
	dot4AVX2(&x[0], &w[0], ldw, n, &out[0])
	return n
}
