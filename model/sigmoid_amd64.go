//go:build !noasm

package model

//go:noescape
func sigmoid4AVX2(s *float64, n int)

// sigmoid4 sets s[i] = sigmoid(s[i]) for the first n &^ 3 values (each in [-700, 700]) in AVX2
// and returns that count (0 without AVX2 and FMA).
func sigmoid4(s []float64, n int) int {
	n &^= 3
	if !haveAVX2FMA || n == 0 {
		return 0
	}
	_ = s[n-1]
	sigmoid4AVX2(&s[0], n)
	return n
}
