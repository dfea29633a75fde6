package jsonl

import (
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
