package model

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

var impl gonum.Implementation

// sgemmExt, when not nil, computes every float32 product in place of the
// assembly kernel of sgemm.go, with gonum's Sgemm signature (row-major).
// blas_openblas.go sets it to OpenBLAS under the build tag openblas;
// sgemmExtName names it.
var (
	sgemmExt     func(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	sgemmExtName string
)

// sgemmGeneric is Sgemm without the assembly kernel: sgemmExt when set,
// else gonum's pure-Go implementation.
func sgemmGeneric(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if sgemmExt != nil {
		sgemmExt(trans(tA), trans(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	impl.Sgemm(trans(tA), trans(tB), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// gemm computes c = alpha*op(a)*op(b) + beta*c with row-major operands:
// op(a) is m x k, op(b) is k x n, c is m x n.
func gemm[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	switch cc := any(c).(type) {
	case []float32:
		sgemm(tA, tB, m, n, k, float32(alpha), any(a).([]float32), lda, any(b).([]float32), ldb, float32(beta), cc, ldc)
	case []float64:
		impl.Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), any(a).([]float64), lda, any(b).([]float64), ldb, float64(beta), cc, ldc)
	}
}
