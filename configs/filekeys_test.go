package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileKeys: the keys a recipe file sets, with their lines; a default the file does not
// write is absent; a file that does not parse is an error naming it.
func TestFileKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.toml")
	text := "kind = \"reranker\"\n\n[model]\n# H\nhidden = 384\n[rerank]\nmatch_init = 1.0\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := FileKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, line := range map[string]int{"kind": 1, "model": 3, "model.hidden": 5, "rerank.match_init": 7} {
		if keys[k] != line {
			t.Errorf("%s: line %d, want %d (%v)", k, keys[k], line, keys)
		}
	}
	if _, ok := keys["model.layers"]; ok {
		t.Errorf("model.layers listed: %v", keys)
	}
	if err := os.WriteFile(path, []byte("[model\nhidden = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FileKeys(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("unparsable file: err = %v", err)
	}
}
