package export

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKilledExportLeftover: issue 37's killed export left a hidden .<out>.tmp-* directory
// holding a loadable model, never cleaned. Such a directory is now refused by the openers, and
// the next export into the same place removes it (its process being gone).
func TestKilledExportLeftover(t *testing.T) {
	dir, src := hfBertDir(t)
	r := savedRun(t, src, filepath.Join(dir, TokenizerFile))
	parent := t.TempDir()
	out := filepath.Join(parent, "model")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no `true` to take a finished pid from:", err)
	}
	// What a killed export leaves: a complete-looking model in its temporary directory.
	left := filepath.Join(parent, tmpPrefix(out)+strconv.Itoa(dead.Process.Pid)+"-123")
	legacy := filepath.Join(parent, tmpPrefix(out)+"456")
	for _, d := range []string{left, legacy} {
		if err := os.Rename(dir, d); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenBiEncoder(d); err == nil || !strings.Contains(err.Error(), "an export that did not finish") {
			t.Errorf("OpenBiEncoder(%s): %v, want it refused as unfinished", d, err)
		}
		if _, err := OpenCrossEncoder(d); err == nil || !strings.Contains(err.Error(), "an export that did not finish") {
			t.Errorf("OpenCrossEncoder(%s): %v", d, err)
		}
		if err := os.CopyFS(dir, os.DirFS(d)); err != nil {
			t.Fatal(err)
		}
	}
	// A temporary directory of a process still running (this one) is left alone.
	live := filepath.Join(parent, tmpPrefix(out)+strconv.Itoa(os.Getpid())+"-789")
	os.Mkdir(live, 0o755)
	if err := writeDir(out, func(tmp string) error { return exportBiEncoder(r, tmp, Options{Log: &strings.Builder{}}) }); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(parent)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, " "), filepath.Base(live)+" model"; got != want {
		t.Errorf("after the export %s holds %q, want %q", parent, got, want)
	}
}

// TestTruncateDimWarns: issue 37's `export -truncate-dim 16` of a model not trained with
// Matryoshka said nothing; it now warns, naming the loss.
func TestTruncateDimWarns(t *testing.T) {
	dir, src := hfBertDir(t)
	for _, c := range []struct {
		loss string
		dims []int
		want string
	}{
		{"infonce", nil, `truncate_dim 8: the model was trained with loss.name = "infonce", not Matryoshka`},
		{"matryoshka_infonce", []int{16, 4}, "truncate_dim 8 is not among the trained Matryoshka prefixes loss.dims = [16 4]"},
		{"matryoshka_infonce", []int{16, 8}, ""},
	} {
		r := savedRun(t, src, filepath.Join(dir, TokenizerFile))
		r.Recipe.Loss.Name, r.Recipe.Loss.Dims = c.loss, c.dims
		var log strings.Builder
		out := filepath.Join(t.TempDir(), "m")
		if err := writeDir(out, func(tmp string) error { return exportBiEncoder(r, tmp, Options{Log: &log, TruncateDim: 8}) }); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(log.String(), "warning"); got != (c.want != "") || !strings.Contains(log.String(), c.want) {
			t.Errorf("%s %v: log %q, want %q", c.loss, c.dims, log.String(), c.want)
		}
	}
}

// TestOpenRunUnreadable: issue 37's permission error on a run directory was reported as "no
// latest"; an error other than a missing file is now reported as it is.
func TestOpenRunUnreadable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "run")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := OpenRun(file); err == nil || !strings.Contains(err.Error(), "not a directory") || strings.Contains(err.Error(), "no latest") {
		t.Errorf("a file as the run: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Log("root reads any directory: the permission case is not tested")
		return
	}
	dir := t.TempDir()
	os.Chmod(dir, 0)
	defer os.Chmod(dir, 0o755)
	if _, err := OpenRun(dir); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("an unreadable run: %v", err)
	}
}
