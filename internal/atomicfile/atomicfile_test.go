package atomicfile

import (
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplacesOrKeeps(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "metrics.json")
	if err := WriteFile(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error { w.Write([]byte("half")); return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("failed write changed the file to %q", b)
	}
	if err := WriteFile(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("file = %q, want new", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

// TestWriteJSONLayout: WriteJSON writes two-space indented JSON and a final newline (the bytes
// every manifest and config.json of the toolkit had before it existed); a value that does not
// encode leaves the file as it was and names it.
func TestWriteJSONLayout(t *testing.T) {
	p := filepath.Join(t.TempDir(), "manifest.json")
	v := struct {
		Name  string    `json:"name"`
		Dims  []int     `json:"dims"`
		Score float64   `json:"score"`
		Tags  *struct{} `json:"tags"`
	}{"m", []int{4, 2}, 0.5, nil}
	if err := WriteJSON(p, v); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"name\": \"m\",\n  \"dims\": [\n    4,\n    2\n  ],\n  \"score\": 0.5,\n  \"tags\": null\n}\n"
	if b, _ := os.ReadFile(p); string(b) != want {
		t.Fatalf("file = %q, want %q", b, want)
	}
	err := WriteJSON(p, map[string]float64{"x": math.NaN()})
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("NaN: err = %v, want an error naming %s", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != want {
		t.Fatalf("a failed WriteJSON changed the file to %q", b)
	}
}
