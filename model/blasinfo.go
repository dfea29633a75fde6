package model

// BLAS names what computes the package's float32 matrix products:
// "OpenBLAS" in a build with the tag openblas, "Go AVX-512 kernel" on amd64
// CPUs with AVX-512F (unless RAGTRAIN_KERNEL=avx2), "Go AVX2+FMA kernel" on
// amd64 CPUs with AVX2 and FMA, else "gonum (pure Go)".
func BLAS() string {
	switch {
	case sgemmExt != nil:
		return sgemmExtName
	case useAVX512:
		return "Go AVX-512 kernel"
	case haveAVX2FMA:
		return "Go AVX2+FMA kernel"
	}
	return "gonum (pure Go)"
}
