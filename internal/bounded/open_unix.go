//go:build unix

package bounded

import (
	"os"
	"syscall"
)

// openNonblock opens path read-only without waiting for a writer when it is a FIFO; for a
// regular file O_NONBLOCK changes nothing.
func openNonblock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
