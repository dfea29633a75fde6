package bounded

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(p, 10)
	if err != nil || string(b) != "0123456789" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := ReadFile(p, 9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("10 bytes under a 9-byte maximum: err = %v, want ErrTooLarge", err)
	}
	if b, err := ReadFile(p, NoLimit); err != nil || len(b) != 10 {
		t.Fatalf("NoLimit: %d bytes, %v", len(b), err)
	}
	// A link to a regular file is followed.
	l := filepath.Join(dir, "link")
	if err := os.Symlink(p, l); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(l, 10); err != nil || len(b) != 10 {
		t.Fatalf("link: %d bytes, %v", len(b), err)
	}
}

func TestRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "config.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", zero, fifo, dir} {
		_, err := ReadFile(p, Weights)
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile(%s): err = %v, want ErrNotRegular", p, err)
		}
		if _, _, err := Open(p, NoLimit); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open(%s): err = %v, want ErrNotRegular", p, err)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}
}
