//go:build !noasm

package model

import "math"

// geluConsts are the constants of gelu_amd64.s, as float32 bits.
var geluConsts = func() [30]uint32 {
	f := []float64{
		1 / math.Sqrt2, 4, -4,
		-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
		-7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02,
		-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02,
		0.5, -0.5, -87, math.Log2E, 0.693359375, -2.12194440e-4,
		1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1,
		1 / math.Sqrt(2*math.Pi),
	}
	var c [30]uint32
	for i, v := range f {
		c[i] = math.Float32bits(float32(v))
	}
	c[29] = 127
	return c
}()

//go:noescape
func geluAVX2(out, x *float32, n int, c *uint32)

//go:noescape
func geluGradAVX2(out, x, grad *float32, n int, c *uint32)

// geluVec computes gelu on the first len(x) &^ 7 elements and returns how
// many it did.
func geluVec(out, x []float32) int {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0
	}
	geluAVX2(&out[0], &x[0], n, &geluConsts[0])
	return n
}

func geluGradVec(out, x, g []float32) int {
	n := len(x) &^ 7
	if !haveAVX2FMA || n == 0 {
		return 0
	}
	geluGradAVX2(&out[0], &x[0], &g[0], n, &geluConsts[0])
	return n
}
