//go:build openblas

package model

import (
	"gonum.org/v1/netlib/blas/netlib"

	_ "github.com/ragtrain/ragtrain/model/internal/openblas" // links libopenblas
)

// With the build tag openblas every float32 matrix product goes to OpenBLAS
// (Debian libopenblas-dev) through gonum.org/v1/netlib's cgo binding, in
// place of the package's AVX2 kernel (it needs cgo and a C compiler). OpenBLAS
// runs its own threads: OPENBLAS_NUM_THREADS sets how many (all cores by
// default). float64 products (tests only) stay on gonum.
func init() {
	sgemmExt = netlib.Implementation{}.Sgemm
	sgemmExtName = "OpenBLAS"
}
