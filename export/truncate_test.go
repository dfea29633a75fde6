package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ragtrain/ragtrain/model"
)

// TestWriteBiEncoderTruncateDim: a transformer bi-encoder exported with TruncateDim records it
// as sentence-transformers' truncate_dim in config_sentence_transformers.json (beside
// similarity_fn_name) and in ragtrain.json; without it neither file has the key; a size past
// the model's dimension is refused.
func TestWriteBiEncoderTruncateDim(t *testing.T) {
	tok := tinyTokenizer(t)
	m := tinyModel(t, tinyConfig(model.EncoderTransformer, tok.VocabSize()), true, 1)
	h := m.Query.Dim()
	read := func(path string) map[string]any {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return v
	}
	for _, d := range []int{0, h / 2} {
		out := filepath.Join(t.TempDir(), "st")
		meta := tinyMeta
		meta.TruncateDim = d
		if err := WriteBiEncoder(out, m, tok, meta); err != nil {
			t.Fatal(err)
		}
		st, man := read(filepath.Join(out, STConfigFile)), read(filepath.Join(out, ManifestFile))
		if st["similarity_fn_name"] != "cosine" {
			t.Errorf("truncate %d: similarity_fn_name = %v", d, st["similarity_fn_name"])
		}
		for name, v := range map[string]map[string]any{STConfigFile: st, ManifestFile: man} {
			got, ok := v["truncate_dim"]
			switch {
			case d == 0 && ok:
				t.Errorf("%s: truncate_dim = %v without truncation", name, got)
			case d > 0 && got != float64(d):
				t.Errorf("%s: truncate_dim = %v, want %d", name, got, d)
			}
		}
	}
	meta := tinyMeta
	meta.TruncateDim = h + 1
	if err := WriteBiEncoder(filepath.Join(t.TempDir(), "bad"), m, tok, meta); err == nil {
		t.Errorf("truncate_dim %d of a %d-dimensional model: no error", h+1, h)
	}
}
