package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// setConfig rewrites one field of dir/config.json.
func setConfig(t *testing.T, dir, field string, v any) {
	t.Helper()
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[field] = v
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestImportSizesCheckedAgainstTensors: issue 37's config.json sizes (intermediate_size,
// max_position_embeddings, hidden_size, num_hidden_layers, vocab_size at 1e9 or 100000) used to
// be allocated before any tensor was compared with them (a fatal out-of-memory, or 1.6M missing
// tensors listed); now OpenBiEncoder refuses them in one line naming config.json, the field and
// the tensor, allocating no more than the file holds.
func TestImportSizesCheckedAgainstTensors(t *testing.T) {
	for _, tc := range []struct {
		field string
		v     int
		st    bool // keep the sentence-transformers files
	}{
		{"intermediate_size", 1_000_000_000, true},
		{"max_position_embeddings", 1_000_000_000, true},
		{"hidden_size", 1_000_000_000, false},
		{"num_hidden_layers", 100_000, true},
		{"vocab_size", 1_000_000_000, true},
	} {
		dir, _ := hfBertDir(t)
		if !tc.st {
			for _, f := range []string{ModulesFile, PoolingConfigFile, SentenceBertFile, STConfigFile} {
				os.RemoveAll(filepath.Join(dir, f))
			}
		}
		if tc.field == "hidden_size" {
			setConfig(t, dir, "num_attention_heads", 1)
		}
		setConfig(t, dir, tc.field, tc.v)
		var err error
		memcheck.Bounded(t, tc.field, func() { _, err = OpenBiEncoder(dir) })
		if err == nil {
			t.Errorf("%s = %d: opened", tc.field, tc.v)
			continue
		}
		msg := err.Error()
		want := filepath.Join(dir, ConfigFile) + ": " + tc.field + " = "
		if !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%s = %d: %q, want one line starting %q", tc.field, tc.v, msg, want)
		}
	}
}

// TestImportSpecialFiles: config.json, model.safetensors or tokenizer.json linked to /dev/zero
// used to be read until memory ran out; now each is refused as not a regular file.
func TestImportSpecialFiles(t *testing.T) {
	for _, f := range []string{ConfigFile, ModelFile, TokenizerFile} {
		dir, _ := hfBertDir(t)
		p := filepath.Join(dir, f)
		os.Remove(p)
		if err := os.Symlink("/dev/zero", p); err != nil {
			t.Fatal(err)
		}
		var err error
		memcheck.Bounded(t, f, func() {
			var d *BiEncoderDir
			if d, err = OpenBiEncoder(dir); err == nil {
				_, _, err = d.LoadTokenizer()
			}
		})
		if err == nil || !strings.Contains(err.Error(), bounded.ErrNotRegular.Error()) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s -> /dev/zero: %v, want %q naming %s", f, err, bounded.ErrNotRegular, p)
		}
	}
}

// TestMismatchErrorCapped: a model missing 100000 tensors is reported with a count, not a line
// each.
func TestMismatchErrorCapped(t *testing.T) {
	e := &MismatchError{Dir: "d", Missing: make([]TensorRef, 100000)}
	msg := e.Error()
	if n := strings.Count(msg, "\n"); n != maxListed+1 || !strings.Contains(msg, "100000 missing") || !strings.Contains(msg, "and 99980 more") {
		t.Errorf("%d lines: %.300s", n, msg)
	}
}
