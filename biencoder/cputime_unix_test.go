//go:build unix

package biencoder

import (
	"syscall"
	"time"
)

// cpuTime is the user+system CPU time of the process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
