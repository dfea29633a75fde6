//go:build cgo

// Package openblas links libopenblas (Debian libopenblas-dev) into a binary
// that uses gonum.org/v1/netlib/blas/netlib, whose cgo binding declares the
// CBLAS functions but leaves the library to its user. It has no API: the
// model package imports it for its link flag under the build tag openblas.
// It is a package of its own because a Go package cannot mix cgo with
// assembly, and the model package has assembly kernels.
package openblas

// #cgo LDFLAGS: -lopenblas
import "C"
