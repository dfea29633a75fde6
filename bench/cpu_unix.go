//go:build unix

package bench

import (
	"os"
	"syscall"
)

// cpuSeconds is the user + system CPU time of this process so far, all threads included.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// childMaxRSSKiB is the peak resident set of a waited child process in KiB (ru_maxrss; KiB on
// Linux), 0 when the platform does not report it.
func childMaxRSSKiB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss)
	}
	return 0
}
