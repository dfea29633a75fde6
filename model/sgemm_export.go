package model

// SGEMM computes c = op(a)·op(b) (c is m×n; op(a) m×k, op(b) k×n; op transposes when tA / tB)
// with the package's float32 kernels (the ones the training graphs run), row-major with leading
// dimensions lda, ldb, ldc. For callers outside the graphs (late-interaction search, k-means).
func SGEMM(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	sgemm(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
}
