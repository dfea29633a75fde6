package model

import (
	"sync/atomic"
	"time"
)

// gemmCount counts the matrix products of Linear, MatMul and LinearGELU ops and their gradients
// while on (CountGEMM): their flops and the wall time spent in them.
var gemmCount struct {
	on        atomic.Bool
	ns, flops atomic.Int64
}

// CountGEMM turns the counting of matrix products on or off: the products of Linear, MatMul
// and LinearGELU ops and of their gradients (2 flops per multiply-add) and the wall time they
// take (the bias included, LinearGELU's GELU not). The per-block products inside Attention are not counted (they
// run on several goroutines at once, so their times do not add up to wall time). Counting costs
// two clock reads per product.
func CountGEMM(on bool) { gemmCount.on.Store(on) }

// GEMMCounts returns the flops and seconds counted since the last call (or CountGEMM) and
// starts the counts again from zero.
func GEMMCounts() (flops, seconds float64) {
	return float64(gemmCount.flops.Swap(0)), time.Duration(gemmCount.ns.Swap(0)).Seconds()
}

// countGEMM starts counting a product of m x n x k multiply-adds; call the function it returns
// when the product is done.
func countGEMM(m, n, k int) func() {
	if !gemmCount.on.Load() {
		return func() {}
	}
	t0 := time.Now()
	return func() {
		gemmCount.ns.Add(int64(time.Since(t0)))
		gemmCount.flops.Add(2 * int64(m) * int64(n) * int64(k))
	}
}
