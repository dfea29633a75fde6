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

//go:noescape
func dot4x2AVX2(x, w *float32, ldx, ldw, n int, out *float32)

// dot4x2Vec is dot4Vec for the two rows x[:k] and x[ldx:ldx+k] at once (out[r] and out[4+r]),
// with the same bits as two dot4Vec calls: the first k &^ 7 values in AVX2, that count returned
// (0 without AVX2).
func dot4x2Vec(out *[8]float32, x []float32, ldx, k int, w []float32, ldw int) int {
	n := k &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0
	}
	_ = x[ldx+n-1]
	_ = w[3*ldw+n-1]
	dot4x2AVX2(&x[0], &w[0], ldx, ldw, n, &out[0])
	return n
}
