package jsonl

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStrings(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	os.WriteFile(good, []byte("\"a b\"\n\"\\u00e9\"\n\"\"\n"), 0o644)
	got, err := Strings(good)
	if err != nil || !slices.Equal(got, []string{"a b", "é", ""}) {
		t.Fatalf("Strings = %q, %v", got, err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("\"a\"\n{\"x\": 1}\n"), 0o644)
	if _, err := Strings(bad); err == nil || !strings.Contains(err.Error(), bad+":2: want a JSON string") {
		t.Fatalf("a non-string line: %v", err)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.jsonl")
	vals := []any{[]int{1, 2}, map[string]any{"s": "é", "x": 0.5}, "q"}
	if err := Write(path, len(vals), func(i int) any { return vals[i] }); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "[1,2]\n{\"s\":\"é\",\"x\":0.5}\n\"q\"\n"; string(b) != want {
		t.Fatalf("file = %q, want %q", b, want)
	}
	nan := []float64{1, math.NaN()}
	err := Write(path, 2, func(i int) any { return nan[i] })
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("a NaN on line 2: %v", err)
	}
}
