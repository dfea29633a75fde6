//go:build !unix

package bench

import "os"

// cpuSeconds is not measured on this platform.
func cpuSeconds() float64 { return 0 }

// childMaxRSSKiB is not measured on this platform.
func childMaxRSSKiB(ps *os.ProcessState) int64 { return 0 }
