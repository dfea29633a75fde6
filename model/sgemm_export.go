package model

// Sgemm computes c = alpha·op(a)·op(b) + beta·c, row-major, op(a) m x k, op(b) k x n, as BLAS
// Sgemm (tA, tB: transpose a, b; lda, ldb, ldc the leading dimensions), with the package's
// AVX2/FMA kernels where the CPU has them (else gonum's): the matrix product of the model's own
// layers, for callers outside the graphs (the kNN-LM's exact search, late-interaction search,
// k-means), always with float32 products (SetMatmulPrecision does not apply). m or n zero is
// a no-op.
func Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	sgemm32(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
