//go:build !unix

package biencoder

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
