package model

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestFMAPeakArguments: FMAPeak refuses widths this CPU has no loop for and thread counts
// below 1, and KernelWidth is one of the widths it measures (or 0 without an assembly kernel).
func TestFMAPeakArguments(t *testing.T) {
	if _, err := FMAPeak(128, 1, time.Millisecond); err == nil {
		t.Error("FMAPeak(128 bits) did not fail")
	}
	if _, err := FMAPeak(256, 0, time.Millisecond); err == nil {
		t.Error("FMAPeak(0 threads) did not fail")
	}
	if w := KernelWidth(); w != 0 && !slices.Contains(FMAWidths(), w) {
		t.Errorf("KernelWidth %d is not among the measurable widths %v", w, FMAWidths())
	}
}

// BenchmarkFMAPeak reports the float32 FMA peak (GFLOP/s) of each vector width on one thread
// and on all of GOMAXPROCS.
func BenchmarkFMAPeak(b *testing.B) {
	for _, w := range FMAWidths() {
		for _, th := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%dbit/threads%d", w, th), func(b *testing.B) {
				var g float64
				for i := 0; i < b.N; i++ {
					var err error
					if g, err = FMAPeak(w, th, 200*time.Millisecond); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(g, "GFLOP/s")
			})
		}
	}
}
