package model

// Sgemm computes c = alpha·op(a)·op(b) + beta·c, row-major, op(a) m x k, op(b) k x n, as BLAS
// Sgemm (tA, tB: transpose a, b), with the package's AVX2/FMA kernels where the CPU has them
// (else gonum's): the matrix product of the model's own layers, for callers outside it (the
// kNN-LM's exact search).
func Sgemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
