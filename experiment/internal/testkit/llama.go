package testkit

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/model"
)

// TinyLlamaGGUF writes dir/tiny.gguf: a random 2-layer grouped-query LLaMA (H = 16, 4 heads, 2
// key/value heads, FFN 24, seed 3) of context maxPosition with the tokenizer of package
// tokenize's tiny-bpe.gguf fixture (858 tokens; V = 860), for the tests of a kind package
// (experiment/<kind>).
func TinyLlamaGGUF(t *testing.T, dir string, maxPosition int) string {
	t.Helper()
	f, err := gguf.Open(filepath.Join("..", "..", "tokenize", "testdata", "tiny-bpe.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var meta []gguf.KV
	for _, k := range f.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			meta = append(meta, gguf.KV{Key: k, Value: f.Meta[k]})
		}
	}
	m, err := model.NewLlama(model.LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: 860,
		RopeTheta: 10000, RMSEps: 1e-5, MaxPosition: maxPosition, TieEmbeddings: true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tiny.gguf")
	if err := model.WriteLlamaGGUF(path, m, meta); err != nil {
		t.Fatal(err)
	}
	return path
}
