// Package membudget says how much memory this process may allocate and how much the machine
// has free, so that a run can refuse a model that cannot fit before building it, and warn about
// one that may not. It reads RLIMIT_AS (getrlimit(2)), the cgroup v2 limit
// /sys/fs/cgroup/memory.max and MemAvailable of /proc/meminfo (proc(5)); any of them missing or
// unreadable counts as no limit.
package membudget

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Paths of the files read, variables for tests.
var (
	CgroupMax = "/sys/fs/cgroup/memory.max"
	MemInfo   = "/proc/meminfo"
)

// Limit returns the most bytes this process may allocate, and where that limit comes from in
// words ("RLIMIT_AS", "cgroup memory.max /sys/fs/cgroup/memory.max"); 0 and "" when nothing
// limits it.
func Limit() (int64, string) {
	limit, src := int64(0), ""
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err == nil && rl.Cur != math.MaxUint64 && rl.Cur < math.MaxInt64 {
		limit, src = int64(rl.Cur), "RLIMIT_AS (ulimit -v)"
	}
	if b, err := readPseudo(CgroupMax); err == nil {
		s := strings.TrimSpace(string(b))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && (limit == 0 || n < limit) {
			limit, src = n, "cgroup memory.max "+CgroupMax
		}
	}
	return limit, src
}

// Available returns MemAvailable of /proc/meminfo in bytes, 0 when unknown.
func Available() int64 {
	b, err := readPseudo(MemInfo)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb >= 0 && kb < math.MaxInt64/1024 {
				return kb * 1024
			}
		}
	}
	return 0
}

// Check compares need bytes, described by what, with Limit and Available: above the limit it
// returns an error (one line: what, the need, the limit and its source); above what is available
// it writes a warning to out and returns nil, since another process may free memory (two runs
// started side by side must not refuse each other at random).
func Check(need int64, what string, out io.Writer) error {
	if limit, src := Limit(); limit > 0 && need > limit {
		return fmt.Errorf("%s: need an estimated %s, above the %s this process may allocate (%s)", what, GiB(need), GiB(limit), src)
	}
	if avail := Available(); avail > 0 && need > avail {
		fmt.Fprintf(out, "warning: %s: need an estimated %s, above the %s the machine has available now (MemAvailable); going on\n", what, GiB(need), GiB(avail))
	}
	return nil
}

// GiB formats bytes in GiB with two decimals.
func GiB(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

// readPseudo reads a kernel pseudo-file (whose stated size is 0), at most 1 MiB of it.
func readPseudo(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}
