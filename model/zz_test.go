package model

import (
	"testing"
)

var sink float64

func erfB(x float64) float64 {
	if x > 4 { x = 4 } else if x < -4 { x = -4 }
	x2 := x * x
	x4 := x2 * x2
	x8 := x4 * x4
	// p = a1 + a3 x2 + a5 x4 + a7 x6 + a9 x8 + a11 x10 + a13 x12 (Estrin)
	p01 := -1.60960333262415e-02 + x2*-2.95459980854025e-03
	p23 := -7.34990630326855e-04 + x2*-5.69250639462346e-05
	p45 := -2.10102402082508e-06 + x2*2.77068142495902e-08
	p6 := -2.72614225801306e-10
	p := (p01 + x4*p23) + x8*(p45+x4*p6)
	q01 := -1.42647390514189e-02 + x2*-7.37332916720468e-03
	q23 := -1.68282697438203e-03 + x2*-2.13374055278905e-04
	q := q01 + x4*q23 + x8*-1.45660718464996e-05
	return x * p / q
}

func BenchmarkErf32(b *testing.B) {
	s := 0.0
	for i := 0; i < b.N; i++ {
		s += erf32(float64(i%1000) * 0.001)
	}
	sink = s
}
func BenchmarkErfB(b *testing.B) {
	s := 0.0
	for i := 0; i < b.N; i++ {
		s += erfB(float64(i%1000) * 0.001)
	}
	sink = s
}
func BenchmarkErfArr(b *testing.B) {
	x := make([]float64, 4096)
	for i := range x { x[i] = float64(i%1000)*0.003 - 1.5 }
	o := make([]float64, len(x))
	for i := 0; i < b.N; i++ {
		for j, v := range x { o[j] = erfB(v) }
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/elem")
}
func BenchmarkErfArr32(b *testing.B) {
	x := make([]float64, 4096)
	for i := range x { x[i] = float64(i%1000)*0.003 - 1.5 }
	o := make([]float64, len(x))
	for i := 0; i < b.N; i++ {
		for j, v := range x { o[j] = erf32(v) }
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(x)), "ns/elem")
}
