package colbert_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestConfigBoundsEncodeBatch: colbert.encode_batch is bounded like train.batch_size
// (configs.MaxBatch) before anything is allocated from it; 10^12 once trained the run, then died
// with "fatal error: out of memory" while encoding the corpus, leaving a resumable-looking run.
func TestConfigBoundsEncodeBatch(t *testing.T) {
	dir := testkit.NewSlice(t)
	path := filepath.Join(dir, "c.toml")
	head := "kind = \"colbert\"\n[data]\ndir = \"" + filepath.Join(dir, "data") + "\"\n[tokenizer]\ntrain = true\n[loss]\nname = \"colbert_contrastive\"\n[colbert]\n"
	for _, c := range []struct{ body, want string }{
		{"encode_batch = 1000000000000\n", `c.toml:9: colbert.encode_batch: must be <= 65536`},
		{"encode_batch = 0\n", `c.toml:9: colbert.encode_batch: must be >= 1`},
	} {
		_, err := testkit.LoadText(t, path, head+c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
	if _, err := testkit.LoadText(t, path, head+"encode_batch = 65536\n"); err != nil {
		t.Errorf("encode_batch = 65536: %v", err)
	}
}
