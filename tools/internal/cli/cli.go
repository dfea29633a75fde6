// Package cli is the command-line plumbing the tools (tools/...) share: the check that a
// command got the arguments it needs, and the one line a failed command ends with.
package cli

import (
	"flag"
	"fmt"
	"os"
)

// Need returns when ok (the arguments a command needs are there); otherwise it prints the flag
// package's usage message (flag.Usage) and exits with status 2.
func Need(ok bool) {
	if !ok {
		flag.Usage()
		os.Exit(2)
	}
}

// NeedOr is Need with usage, a line of its own, printed to stderr instead of flag.Usage.
func NeedOr(ok bool, usage string) {
	if !ok {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
}

// Check returns when err is nil; otherwise it prints "name: err" to stderr and exits with
// status 1. Deferred calls do not run.
func Check(name string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
