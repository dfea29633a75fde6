package export

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// tinyGGUFTokenizer is the 858-token byte-level BPE fixture of package tokenize.
func tinyGGUFTokenizer(t *testing.T) *tokenize.GGUFTokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join("..", "tokenize", "testdata", "tiny-bpe.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadGGUFTokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tinyLlamaConfig is a 2-layer grouped-query LLaMA over the tiny tokenizer's vocabulary.
func tinyLlamaConfig(tie bool) model.LlamaConfig {
	return model.LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: 860,
		RopeTheta: 10000, RMSEps: 1e-5, MaxPosition: 64, TieEmbeddings: tie}
}

// TestWriteLlamaHFRoundTrip: a random LLaMA (tied and untied) exported by WriteLlamaHF reads
// back through OpenLlamaHF with the same configuration and every parameter bit for bit, and the
// directory holds the Hugging Face files with the tokenizer's special ids and chat template.
func TestWriteLlamaHFRoundTrip(t *testing.T) {
	tok := tinyGGUFTokenizer(t)
	for _, tie := range []bool{true, false} {
		m, err := model.NewLlama(tinyLlamaConfig(tie), 7)
		if err != nil {
			t.Fatal(err)
		}
		// Norm weights of 1 would hide a swap with another norm: perturb every parameter.
		for i, p := range m.Params() {
			v := p.Value.Data().([]float32)
			for j := range v {
				v[j] += float32(i) * 1e-3 * float32(j%7)
			}
		}
		out := filepath.Join(t.TempDir(), "hf")
		if err := WriteLlamaHF(out, m, tok); err != nil {
			t.Fatal(err)
		}
		back, err := OpenLlamaHF(out)
		if err != nil {
			t.Fatal(err)
		}
		if back.Cfg != m.Cfg {
			t.Fatalf("tie %v: config %+v, want %+v", tie, back.Cfg, m.Cfg)
		}
		for _, p := range m.Params() {
			a, b := p.Value.Data().([]float32), back.Param(p.Name).Value.Data().([]float32)
			for j := range a {
				if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
					t.Fatalf("tie %v: %s[%d] = %v after the round trip, want %v", tie, p.Name, j, b[j], a[j])
				}
			}
		}
		var gen, tc map[string]any
		readJSONFile(t, filepath.Join(out, GenerationConfigFile), &gen)
		readJSONFile(t, filepath.Join(out, TokenizerConfigFile), &tc)
		if gen["eos_token_id"] != float64(tok.EOS()) || gen["bos_token_id"] != float64(tok.BOS()) {
			t.Errorf("generation_config.json %v: want bos %d, eos %d", gen, tok.BOS(), tok.EOS())
		}
		if tc["chat_template"] != tok.ChatTemplate() {
			t.Errorf("tokenizer_config.json chat_template %q, want %q", tc["chat_template"], tok.ChatTemplate())
		}
		if _, err := os.Stat(filepath.Join(out, TokenizerFile)); err != nil {
			t.Error(err)
		}
	}
}

// TestWriteLlamaHFRefuses: an existing non-empty directory and a tokenizer larger than the
// vocabulary are refused, and nothing is left behind.
func TestWriteLlamaHFRefuses(t *testing.T) {
	tok := tinyGGUFTokenizer(t)
	c := tinyLlamaConfig(true)
	c.Vocab = 100
	m, err := model.NewLlama(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "hf")
	if err := WriteLlamaHF(out, m, tok); err == nil || !strings.Contains(err.Error(), "vocabulary is 100") {
		t.Fatalf("err = %v, want the vocabulary mismatch", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteLlamaHF(dir, m, tok); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("err = %v, want a refusal of the non-empty directory", err)
	}
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
