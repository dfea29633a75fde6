package model

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"gorgonia.org/gorgonia"
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

// TestCountGEMM: with counting on, a Linear op's forward and backward count the flops of their
// three products (forward, dx, dw: 2·N·In·Out each) and nothing while counting is off.
func TestCountGEMM(t *testing.T) {
	const N, In, Out = 5, 4, 3
	r := rand.New(rand.NewPCG(1, 1))
	g := gorgonia.NewGraph()
	x, w, b := leafIn(g, "x", randDense(r, N, In)), leafIn(g, "w", randDense(r, Out, In)), leafIn(g, "b", randDense(r, Out))
	y, err := Linear(x, w, b)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := weightedSum(y, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gorgonia.Grad(loss, x, w, b); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	defer CountGEMM(false)
	for _, on := range []bool{false, true} {
		CountGEMM(on)
		GEMMCounts()
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		flops, _ := GEMMCounts()
		want := 0.0
		if on {
			want = 3 * 2 * N * In * Out
		}
		if flops != want {
			t.Errorf("counting %t: %v flops, want %v", on, flops, want)
		}
	}
}
