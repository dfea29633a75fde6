package membudget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	CgroupMax, MemInfo = filepath.Join(dir, "memory.max"), filepath.Join(dir, "meminfo")
	defer func() { CgroupMax, MemInfo = "/sys/fs/cgroup/memory.max", "/proc/meminfo" }()
	os.WriteFile(CgroupMax, []byte("1073741824\n"), 0o644)
	os.WriteFile(MemInfo, []byte("MemTotal:       16000000 kB\nMemAvailable:     524288 kB\n"), 0o644)
	if lim, src := Limit(); lim > 1<<30 || src == "" {
		t.Fatalf("Limit = %d, %q; want at most the cgroup's 1 GiB", lim, src)
	}
	if a := Available(); a != 512<<20 {
		t.Fatalf("Available = %d, want %d", a, 512<<20)
	}
	var out strings.Builder
	err := Check(2<<30, "model.hidden = 9", &out)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "model.hidden = 9: need an estimated 2.00 GiB") {
		t.Errorf("2 GiB under a 1 GiB limit: %v", err)
	}
	out.Reset()
	if err := Check(768<<20, "x", &out); err != nil || !strings.Contains(out.String(), "warning: x: need an estimated 0.75 GiB, above the 0.50 GiB") {
		t.Errorf("above MemAvailable, below the limit: err %v, out %q", err, out.String())
	}
	os.WriteFile(CgroupMax, []byte("max\n"), 0o644)
	out.Reset()
	if err := Check(256<<20, "x", &out); err != nil || out.Len() != 0 {
		t.Errorf("within everything: err %v, out %q", err, out.String())
	}
}
