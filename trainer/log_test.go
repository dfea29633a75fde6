package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogSize: Size is the file's length, from OpenLog on an existing file and after writes.
func TestLogSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(path, []byte("{\"old\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lg, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if lg.Size() != 10 {
		t.Errorf("Size of a 10-byte log = %d", lg.Size())
	}
	if err := lg.Write(map[string]int{"step": 5}); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	fi, _ := os.Stat(path)
	if lg.Size() != fi.Size() || fi.Size() != 10+int64(len("{\"step\":5}\n")) {
		t.Errorf("Size %d, file %d bytes", lg.Size(), fi.Size())
	}
}

// TestOpenLogAt: reopening at a recorded size drops what came after and appends from there, so
// a resumed run's log holds each step once; a size beyond the file is refused.
func TestOpenLogAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	lg, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var at int64
	for step := 1; step <= 4; step++ {
		if err := lg.Write(map[string]any{"phase": "train", "step": step}); err != nil {
			t.Fatal(err)
		}
		if step == 2 {
			at = lg.Size() // the checkpoint at step 2
		}
	}
	lg.Close() // killed after step 4

	if _, err := OpenLogAt(path, 1<<20); err == nil || !strings.Contains(err.Error(), "fewer than") {
		t.Errorf("size beyond the file: err = %v", err)
	}
	if _, err := OpenLogAt(path, -1); err == nil {
		t.Error("negative size: no error")
	}
	lg, err = OpenLogAt(path, at)
	if err != nil {
		t.Fatal(err)
	}
	if lg.Size() != at {
		t.Errorf("Size after OpenLogAt = %d, want %d", lg.Size(), at)
	}
	for step := 3; step <= 4; step++ { // the resumed run replays steps 3 and 4
		if err := lg.Write(map[string]any{"phase": "train", "step": step}); err != nil {
			t.Fatal(err)
		}
	}
	lg.Close()
	b, _ := os.ReadFile(path)
	want := `{"phase":"train","step":1}
{"phase":"train","step":2}
{"phase":"train","step":3}
{"phase":"train","step":4}
`
	if string(b) != want {
		t.Errorf("log after resume:\n%s\nwant\n%s", b, want)
	}
	// A missing log reopened at 0 is created.
	fresh := filepath.Join(t.TempDir(), "log.jsonl")
	lg, err = OpenLogAt(fresh, 0)
	if err != nil {
		t.Fatal(err)
	}
	lg.Close()
	if _, err := os.Stat(fresh); err != nil {
		t.Error(err)
	}
}
