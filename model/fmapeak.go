package model

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// fmaChains is the number of independent FMA chains of one iteration of the peak loops
// (fmapeak_amd64.s).
const fmaChains = 12

// KernelWidth is the vector width in bits of the float32 matrix-product kernel that runs here:
// 512 with the AVX-512 kernel, 256 with the AVX2 one, 0 where neither runs (gonum or OpenBLAS
// do the products).
func KernelWidth() int {
	switch {
	case sgemmExt != nil || !haveAVX2FMA:
		return 0
	case useAVX512:
		return 512
	}
	return 256
}

// FMAWidths are the vector widths in bits whose FMA peak FMAPeak can measure on this CPU,
// narrowest first.
func FMAWidths() []int {
	var w []int
	for _, b := range []int{256, 512} {
		if fmaLoop(b) != nil {
			w = append(w, b)
		}
	}
	return w
}

// FMAPeak measures the float32 FMA peak of this machine in GFLOP/s (2 flops per lane of each
// FMA): threads goroutines, each locked to its own OS thread, run a loop of 12 independent FMA
// chains on registers of width bits (256: AVX2 ymm; 512: AVX-512 zmm) for about d, all at once;
// the result is their summed rate. It is what the matrix-product kernels could reach on those
// cores with nothing but FMAs to do (no loads, no stores), so a kernel's GFLOP/s over it is the
// share of the machine it uses. Other processes running at the same time lower it.
func FMAPeak(width, threads int, d time.Duration) (float64, error) {
	loop := fmaLoop(width)
	if loop == nil {
		return 0, fmt.Errorf("model: FMA peak: this CPU (or build) has no %d-bit FMA loop; widths here: %v", width, FMAWidths())
	}
	if threads < 1 {
		return 0, fmt.Errorf("model: FMA peak: %d threads", threads)
	}
	flopsPerIter := float64(fmaChains * 2 * width / 32)
	const chunk = 1 << 16 // iterations between clock reads
	rates := make([]float64, threads)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range rates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start.Wait()
			loop(chunk) // warm up: clocks and the upper halves of the vector units
			t0 := time.Now()
			n := 0
			for time.Since(t0) < d {
				loop(chunk)
				n += chunk
			}
			rates[i] = float64(n) * flopsPerIter / time.Since(t0).Seconds() / 1e9
		}()
	}
	start.Done()
	wg.Wait()
	total := 0.0
	for _, r := range rates {
		total += r
	}
	return total, nil
}
