package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeHFCopy writes tok with WriteHF into a new directory and returns it.
func writeHFCopy(t *testing.T, tok *GGUFTokenizer) string {
	t.Helper()
	dir := t.TempDir()
	if err := tok.WriteHF(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadHFByteLevelGolden: the directory WriteHF writes loads back through LoadHFByteLevel
// with transformers' ids, decodings and chat prompt (the goldens of the GGUF tokenizers), and
// the same special ids: the tiny fixture always, SmolLM2-135M-Instruct when its GGUF is here.
func TestLoadHFByteLevelGolden(t *testing.T) {
	cases := []struct{ gguf, golden string }{
		{filepath.Join("testdata", "tiny-bpe.gguf"), "tiny-bpe_golden.json"},
		{filepath.Join("..", "pretrained", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf"), "smollm2_golden.json"},
	}
	for _, c := range cases {
		if _, err := os.Stat(c.gguf); err != nil {
			t.Logf("no %s: skipped", c.gguf)
			continue
		}
		src := openGGUFTokenizer(t, c.gguf)
		tok, err := LoadHFByteLevel(writeHFCopy(t, src))
		if err != nil {
			t.Fatal(err)
		}
		if tok.VocabSize() != src.VocabSize() || tok.BOS() != src.BOS() || tok.EOS() != src.EOS() || tok.PAD() != src.PAD() || tok.unk != src.unk {
			t.Errorf("%s: V %d bos %d eos %d pad %d unk %d, want %d %d %d %d %d", c.gguf, tok.VocabSize(), tok.BOS(), tok.EOS(), tok.PAD(), tok.unk,
				src.VocabSize(), src.BOS(), src.EOS(), src.PAD(), src.unk)
		}
		for id := range src.tokens {
			if tok.IsControl(id) != src.IsControl(id) {
				t.Errorf("%s: id %d control %t, GGUF %t", c.gguf, id, tok.IsControl(id), src.IsControl(id))
			}
		}
		checkGGUFGolden(t, tok, loadGGUFGolden(t, filepath.Join("testdata", c.golden)))
	}
}

// TestLoadHFByteLevelDigits: SmolLM2's own tokenizer.json puts Digits (individual_digits) before
// ByteLevel; with that pre-tokenizer the ids are those of the tokenizers library on the same
// file, for the hand-made strings (whitespace before digits, where the GGUF rule differs).
func TestLoadHFByteLevelDigits(t *testing.T) {
	dir := writeHFCopy(t, openGGUFTokenizer(t, filepath.Join("testdata", "tiny-bpe.gguf")))
	path := filepath.Join(dir, JSONFile)
	var j map[string]any
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &j) != nil {
		t.Fatal(err)
	}
	j["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Digits", "individual_digits": true}, j["pre_tokenizer"]}}
	b, _ = json.Marshal(j)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadHFByteLevel(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.digits {
		t.Fatal("the Digits step was not recognised")
	}
	// Without Python: a digit is always its own piece, so "x  12y" is "x  " + "1" + "2" + "y".
	if a, w := tok.Encode("x  12y"), append(append(append(tok.Encode("x  "), tok.Encode("1")...), tok.Encode("2")...), tok.Encode("y")...); !reflect.DeepEqual(a, w) {
		t.Errorf("Encode(x  12y) = %v, want %v", a, w)
	}
	texts := []string{"x  12y", "in 2019, 3.5 mg", "  7", "a\t\t42\n\n9", "١٢٣ ٤", "½ and ⅔", "no digits here", "x1y2z3  "}
	for _, s := range loadGGUFGolden(t, filepath.Join("testdata", "tiny-bpe_golden.json")).Strings {
		texts = append(texts, s.Text)
	}
	ids := tokenizersIDs(t, path, texts)
	for i, s := range texts {
		if got := tok.Encode(s); !(len(got) == 0 && len(ids[i]) == 0) && !reflect.DeepEqual(got, ids[i]) {
			t.Errorf("%q: tokenizers %v, Encode %v", s, ids[i], got)
		}
	}
}

// TestLoadHFByteLevelErrors: what the loader does not understand is one error naming the file
// and the field.
func TestLoadHFByteLevelErrors(t *testing.T) {
	base := writeHFCopy(t, openGGUFTokenizer(t, filepath.Join("testdata", "tiny-bpe.gguf")))
	read := func(name string) map[string]any {
		var j map[string]any
		b, err := os.ReadFile(filepath.Join(base, name))
		if err != nil || json.Unmarshal(b, &j) != nil {
			t.Fatal(err)
		}
		return j
	}
	for _, c := range []struct {
		file, want string
		edit       func(j map[string]any)
	}{
		{JSONFile, "model.type", func(j map[string]any) { j["model"].(map[string]any)["type"] = "WordPiece" }},
		{JSONFile, "normalizer", func(j map[string]any) { j["normalizer"] = map[string]any{"type": "NFC"} }},
		{JSONFile, "pre_tokenizer", func(j map[string]any) { j["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }},
		{JSONFile, "post_processor", func(j map[string]any) { j["post_processor"] = map[string]any{"type": "TemplateProcessing"} }},
		{JSONFile, "model.merges", func(j map[string]any) { j["model"].(map[string]any)["merges"] = []any{[]any{"Ġ", "zzzqq"}} }},
		{JSONFile, "model.vocab", func(j map[string]any) { j["model"].(map[string]any)["vocab"] = map[string]any{"a": 0, "b": 5} }},
		{ConfigFile, "add_bos_token", func(j map[string]any) { j["add_bos_token"] = true }},
		{ConfigFile, "eos_token", func(j map[string]any) { j["eos_token"] = "<nope>" }},
		{ConfigFile, "chat_template", func(j map[string]any) { j["chat_template"] = "{{ messages }}" }},
	} {
		dir := t.TempDir()
		for _, name := range []string{JSONFile, ConfigFile} {
			j := read(name)
			if name == c.file {
				c.edit(j)
			}
			b, _ := json.Marshal(j)
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := LoadHFByteLevel(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.file) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %s: err = %v", c.file, c.want, err)
		}
	}
}
