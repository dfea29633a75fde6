// Package memcheck is a test helper: it measures how many bytes a call allocates, so that tests
// of the loaders can assert that a hostile file of a few bytes cannot make them allocate
// gigabytes.
package memcheck

import (
	"runtime"
	"testing"
)

// Limit is the allocation budget the loaders' regression tests allow one hand-made input.
const Limit = 100 << 20

// Allocated returns the bytes allocated while f runs (runtime.MemStats.TotalAlloc, so memory
// freed during the call counts too: it bounds the peak from above).
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Bounded runs f and fails t if it allocates more than Limit bytes.
func Bounded(t testing.TB, what string, f func()) {
	t.Helper()
	if n := Allocated(f); n > Limit {
		t.Errorf("%s allocated %d MB, want under %d MB", what, n>>20, Limit>>20)
	}
}
