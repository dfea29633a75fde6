package readerlm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
)

// TestEvalBatchBounded: reader_lm.eval_batch is bounded by configs.MaxBatch when the recipe is
// loaded, naming file, line and key; 10^12 once passed (the memory estimate only warned) and
// panicked in makeslice when the dev perplexity batch was built.
func TestEvalBatchBounded(t *testing.T) {
	dir := t.TempDir()
	tinyRecipeFrom(t, dir, "lora", tinyGGUF(t, dir)) // writes dir/tiny.toml
	path := filepath.Join(dir, "tiny.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ value, want string }{
		{"1000000000000", "tiny.toml:20: reader_lm.eval_batch: must be <= 65536"},
		{"0", "tiny.toml:20: reader_lm.eval_batch: must be >= 1"},
	} {
		os.WriteFile(path, []byte(strings.Replace(string(b), "eval_batch = 8", "eval_batch = "+c.value, 1)), 0o644)
		if _, err := configs.Load(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("eval_batch = %s: err = %v, want %q", c.value, err, c.want)
		}
	}
}
