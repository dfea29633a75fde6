//go:build !noasm

package model

import "math"

//go:noescape
func softmaxExpAVX2(out, x, m *float32, mstep, n int, shift float32, c *uint32) (sum float32)

// softmaxExpVec sets out[j] = m[j]·e^min(x[j]-shift, 0) on the first
// len(x) &^ 7 elements and returns how many it did and their sum.
func softmaxExpVec(out, x, m []float32, shift float32) (int, float32) {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0, 0
	}
	_, _ = out[n-1], m[n-1]
	return n, softmaxExpAVX2(&out[0], &x[0], &m[0], 32, n, shift, &geluConsts[0])
}

//go:noescape
func maskedMaxAVX2(x, m *float32, mstep, n int, negInf *float32) float32

var negInf32 = float32(math.Inf(-1))

// maskedMaxVec returns the largest x[j] with m[j] != 0 over the first
// len(x) &^ 7 elements (-Inf when none), and how many it looked at.
func maskedMaxVec(x, m []float32) (int, float32) {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0, negInf32
	}
	_ = m[n-1]
	return n, maskedMaxAVX2(&x[0], &m[0], 32, n, &negInf32)
}

var ones8 = [8]float32{1, 1, 1, 1, 1, 1, 1, 1}

// maxVec returns the largest of the first len(x) &^ 7 elements (-Inf when
// none) and how many it looked at.
func maxVec(x []float32) (int, float32) {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0, negInf32
	}
	return n, maskedMaxAVX2(&x[0], &ones8[0], 0, n, &negInf32)
}

// expShiftVec sets out[j] = e^min(x[j]-shift, 0) on the first len(x) &^ 7
// elements and returns how many it did and their sum.
func expShiftVec(out, x []float32, shift float32) (int, float32) {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0, 0
	}
	_ = out[n-1]
	return n, softmaxExpAVX2(&out[0], &x[0], &ones8[0], 0, n, shift, &geluConsts[0])
}
