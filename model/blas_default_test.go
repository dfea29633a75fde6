//go:build !openblas

package model

import "testing"

// TestOpenBLASAgreement lives in blas_openblas_test.go; this build has no
// OpenBLAS to compare with.
func TestOpenBLASAgreement(t *testing.T) {
	if got := BLAS(); got == "OpenBLAS" {
		t.Fatalf("BLAS() = %q in a build without -tags openblas", got)
	}
	t.Skip("OpenBLAS agreement not checked: built without -tags openblas (needs Debian libopenblas-dev; run go test -tags openblas ./model)")
}
