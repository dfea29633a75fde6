//go:build !noasm

package model

//go:noescape
func packA6AVX2(dst, a *float32, lda, kb int, alpha float32)

// packA6Vec packs the first kb &^ 7 columns of the 6 rows of a (row r at
// a[r*lda:]) into dst as packA does, and returns how many columns it did.
func packA6Vec(dst, a []float32, lda, kb int, alpha float32) int {
	n := kb &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0
	}
	_, _ = dst[n*gemmMR-1], a[(gemmMR-1)*lda+n-1]
	packA6AVX2(&dst[0], &a[0], lda, n, alpha)
	return n
}
