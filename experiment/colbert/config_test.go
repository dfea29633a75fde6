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

// TestConfigGradCacheKeys: the kind reads train.mini_batch_size and train.dynamic_padding (a kind
// that does not is refused by name, see configs); a chunk size that does not divide
// train.batch_size is refused naming both keys.
func TestConfigGradCacheKeys(t *testing.T) {
	dir := testkit.NewSlice(t)
	path := filepath.Join(dir, "c.toml")
	head := "kind = \"colbert\"\n[data]\ndir = \"" + filepath.Join(dir, "data") + "\"\n[tokenizer]\ntrain = true\n[loss]\nname = \"colbert_contrastive\"\n[train]\nbatch_size = 16\n"
	for body, want := range map[string]string{
		"mini_batch_size = 8\ndynamic_padding = true\n": "",
		"mini_batch_size = 16\n":                        "",
		"mini_batch_size = 6\n":                         `c.toml:10: train.mini_batch_size: train.mini_batch_size = 6 does not divide train.batch_size = 16`,
		"mini_batch_size = 32\n":                        `train.mini_batch_size = 32 does not divide train.batch_size = 16`,
		"mini_batch_size = -1\n":                        `c.toml:10: train.mini_batch_size: must be >= 0, got -1`,
		"dynamic_padding = 1\n":                         `train.dynamic_padding: wrong type`,
	} {
		_, err := testkit.LoadText(t, path, head+body)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
}
