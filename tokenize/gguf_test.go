package tokenize

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ragtrain/ragtrain/gguf"
)

// ggufGolden is tiny-bpe_golden.json / smollm2_golden.json: transformers'
// ids and decodings (testdata/gen_tiny_gguf.py, tools/interop/gguf_tokenizer.py).
type ggufGolden struct {
	Source       string `json:"source"`
	VocabSize    int    `json:"vocab_size"`
	ChatPromptHi string `json:"chat_prompt_hi"`
	Strings      []struct {
		Text        string `json:"text"`
		IDs         []int  `json:"ids"`
		Decoded     string `json:"decoded"`
		DecodedSkip string `json:"decoded_skip"`
	} `json:"strings"`
}

func loadGGUFGolden(t *testing.T, path string) ggufGolden {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g ggufGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func openGGUFTokenizer(t *testing.T, path string) *GGUFTokenizer {
	t.Helper()
	tok, err := LoadGGUFTokenizer(mustOpen(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func checkGGUFGolden(t *testing.T, tok *GGUFTokenizer, g ggufGolden) {
	t.Helper()
	for _, s := range g.Strings {
		got := tok.Encode(s.Text)
		if len(got) == 0 && len(s.IDs) == 0 {
			got = s.IDs
		}
		if !reflect.DeepEqual(got, s.IDs) {
			t.Errorf("Encode(%q) = %v\nwant (transformers) %v", s.Text, got, s.IDs)
		}
		if d := tok.Decode(s.IDs, false); d != s.Decoded {
			t.Errorf("Decode(%v) = %q, want %q", s.IDs, d, s.Decoded)
		}
		if d := tok.Decode(s.IDs, true); d != s.DecodedSkip {
			t.Errorf("Decode(%v, skip) = %q, want %q", s.IDs, d, s.DecodedSkip)
		}
	}
	if p := tok.ChatPrompt("Hi"); p != g.ChatPromptHi {
		t.Errorf("ChatPrompt(Hi) = %q\nwant %q", p, g.ChatPromptHi)
	}
}

// The tiny fixture (858 tokens, 600 of SmolLM2's merges, three bytes
// missing from the alphabet, a control token outside it, a user-defined
// token) gives transformers' ids, decodings and chat prompt.
func TestGGUFTokenizerTinyGolden(t *testing.T) {
	tok := openGGUFTokenizer(t, filepath.Join("testdata", "tiny-bpe.gguf"))
	g := loadGGUFGolden(t, filepath.Join("testdata", "tiny-bpe_golden.json"))
	if tok.VocabSize() != g.VocabSize || tok.BOS() != 1 || tok.EOS() != 2 || tok.PAD() != 2 {
		t.Fatalf("V %d bos %d eos %d pad %d", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.PAD())
	}
	checkGGUFGolden(t, tok, g)
	if !tok.IsControl(2) || tok.IsControl(3) || tok.IsControl(4) {
		t.Error("control: <|im_end|> must be, <|€|> (outside the byte alphabet) and <think> (user-defined) not")
	}
}

// SmolLM2-135M-Instruct's own tokenizer against transformers' ids (the
// interop script checks SciFact and 1,000 more strings).
func TestGGUFTokenizerSmolLM2Golden(t *testing.T) {
	p := filepath.Join("..", "pretrained", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s (bash tools/pretrained/get.sh SmolLM2-135M-Instruct)", p)
	}
	tok := openGGUFTokenizer(t, p)
	if tok.VocabSize() != 49152 || tok.BOS() != 1 || tok.EOS() != 2 || tok.PAD() != 2 {
		t.Fatalf("V %d bos %d eos %d pad %d", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.PAD())
	}
	checkGGUFGolden(t, tok, loadGGUFGolden(t, filepath.Join("testdata", "smollm2_golden.json")))
}

// GPT-2's pattern, case by case (the regex's alternation order and its
// \s+(?!\S) back-off).
func TestGPT2Split(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"don't", []string{"don", "'t"}},
		{"I'M", []string{"I", "'", "M"}},
		{" 's", []string{" '", "s"}},
		{"a  b", []string{"a", " ", " b"}},
		{"a \n b", []string{"a", " \n", " b"}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}}, // the back-off leaves one "\n", which \s+ then takes
		{"a\n\n b", []string{"a", "\n\n", " b"}},
		{"x   ", []string{"x", "   "}},
		{"12 345", []string{"12", " 345"}},
		{"a,b!!", []string{"a", ",", "b", "!!"}},
		{"  !?", []string{" ", " !?"}},
		{"日本 語", []string{"日本", " 語"}},
		{"\t\tx", []string{"\t", "\t", "x"}},
		{"a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0", "b"}},
	} {
		var got []string
		gpt2Split(c.in, func(p string) { got = append(got, p) })
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("gpt2Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Invalid UTF-8 decodes as Rust's from_utf8_lossy: one U+FFFD per maximal
// subpart.
func TestAppendLossy(t *testing.T) {
	for in, want := range map[string]string{
		"ok":                   "ok",
		"\xF0\x9F\xA4":         "\uFFFD",             // truncated 4-byte sequence: one
		"\xF0\x9F\xA4x":        "\uFFFDx",            // ... before an ASCII byte
		"\xC0\xAF":             "\uFFFD\uFFFD",       // overlong: each byte
		"\xE0\x80\x80":         "\uFFFD\uFFFD\uFFFD", // E0 needs A0..BF next
		"\xED\xA0\x80":         "\uFFFD\uFFFD\uFFFD", // surrogate
		"\xF4\x90\x80\x80":     "\uFFFD\uFFFD\uFFFD\uFFFD",
		"a\x80b":               "a\uFFFDb",
		"\xE2\x82":             "\uFFFD",
		"\xF0\x9F\x98\x80\xFF": "😀\uFFFD",
	} {
		if got := string(appendLossy(nil, []byte(in))); got != want {
			t.Errorf("appendLossy(%q) = %q, want %q", in, got, want)
		}
	}
}

// tinyMeta is the metadata of a minimal gpt2 tokenizer, for the error tests.
func tinyMeta(over map[string]any) []gguf.KV {
	toks := []string{"<|im_end|>", "a", "b", "ab"}
	meta := map[string]any{
		"tokenizer.ggml.model":        "gpt2",
		"tokenizer.ggml.pre":          "smollm",
		"tokenizer.ggml.tokens":       toks,
		"tokenizer.ggml.merges":       []string{"a b"},
		"tokenizer.ggml.token_type":   []int32{3, 1, 1, 1},
		"tokenizer.ggml.eos_token_id": uint32(0),
	}
	for k, v := range over {
		if v == nil {
			delete(meta, k)
		} else {
			meta[k] = v
		}
	}
	var kv []gguf.KV
	for _, k := range []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges",
		"tokenizer.ggml.token_type", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.chat_template",
		"tokenizer.ggml.bos_token_id"} {
		if v, ok := meta[k]; ok {
			kv = append(kv, gguf.KV{Key: k, Value: v})
		}
	}
	return kv
}

func TestLoadGGUFTokenizerErrors(t *testing.T) {
	dir := t.TempDir()
	load := func(over map[string]any) (*GGUFTokenizer, error) {
		p := filepath.Join(dir, "t.gguf")
		if err := gguf.Write(p, tinyMeta(over), nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return LoadGGUFTokenizer(f)
	}
	tok, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab<|im_end|>ba"); !reflect.DeepEqual(got, []int{3, 0, 2, 1}) {
		t.Errorf("Encode = %v, want [3 0 2 1]", got)
	}
	if tok.BOS() != -1 || tok.PAD() != 0 {
		t.Errorf("bos %d pad %d: want -1 (absent) and eos", tok.BOS(), tok.PAD())
	}
	if p := tok.ChatPrompt("q"); p != "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("ChatPrompt without a template = %q", p)
	}
	for _, c := range []struct {
		over map[string]any
		want string
	}{
		{map[string]any{"tokenizer.ggml.model": "llama"}, `tokenizer.ggml.model "llama"`},
		{map[string]any{"tokenizer.ggml.tokens": nil}, "tokenizer.ggml.tokens missing"},
		{map[string]any{"tokenizer.ggml.merges": []string{"a c"}}, `merges[0] "a c"`},
		{map[string]any{"tokenizer.ggml.merges": []string{"ab"}}, `merges[0] "ab": want two tokens`},
		{map[string]any{"tokenizer.ggml.token_type": []int32{1}}, "token_type: want 4 integers"},
		{map[string]any{"tokenizer.ggml.pre": "llama-bpe"}, `tokenizer.ggml.pre "llama-bpe"`},
		{map[string]any{"tokenizer.ggml.tokens": []string{"<|im_end|>", "1", "2", "12"}, "tokenizer.ggml.merges": []string{"1 2"}}, "merges joining digits"},
		{map[string]any{"tokenizer.ggml.eos_token_id": uint32(4)}, "eos_token_id = 4: want an id below 4"},
		{map[string]any{"tokenizer.ggml.add_bos_token": true}, "add_bos_token is true"},
		{map[string]any{"tokenizer.chat_template": "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"}, "not a ChatML template"},
	} {
		_, err := load(c.over)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line with %q", c.over, err, c.want)
		}
	}
}

// WriteHF's tokenizer.json, loaded by the Hugging Face tokenizers library,
// gives the ids Encode gives on the tiny fixture's strings (skipped without
// the repository's Python environment; tools/interop/gguf_tokenizer.py runs
// the full check on SmolLM2).
func TestGGUFTokenizerWriteHF(t *testing.T) {
	tok := openGGUFTokenizer(t, filepath.Join("testdata", "tiny-bpe.gguf"))
	dir := t.TempDir()
	if err := tok.WriteHF(dir); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Fatal(err)
	}
	if cfg["bos_token"] != "<|im_start|>" || cfg["eos_token"] != "<|im_end|>" || cfg["pad_token"] != "<|im_end|>" ||
		cfg["add_bos_token"] != false || !strings.Contains(cfg["chat_template"].(string), "<|im_start|>") {
		t.Errorf("tokenizer_config.json %v", cfg)
	}
	g := loadGGUFGolden(t, filepath.Join("testdata", "tiny-bpe_golden.json"))
	var texts []string
	for _, s := range g.Strings {
		texts = append(texts, s.Text)
	}
	ids := tokenizersIDs(t, filepath.Join(dir, "tokenizer.json"), texts)
	for i, s := range texts {
		got := tok.Encode(s)
		if len(got) == 0 && len(ids[i]) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, ids[i]) {
			t.Errorf("%q: tokenizers on WriteHF's tokenizer.json %v, Encode %v", s, ids[i], got)
		}
	}
}

// tokenizersIDs encodes texts with the tokenizers library (RAGTRAIN_PYTHON, else the venv) on
// the tokenizer.json at path; the test is skipped with -short or without Python.
func tokenizersIDs(t *testing.T, path string, texts []string) [][]int {
	t.Helper()
	py := os.Getenv("RAGTRAIN_PYTHON")
	if py == "" {
		py = filepath.Join("..", ".venv", "bin", "python")
	}
	if testing.Short() {
		t.Skip("-short: the tokenizers check runs Python")
	}
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no Python environment at %s", py)
	}
	in, _ := json.Marshal(texts)
	cmd := exec.Command(py, "-c", `import json, sys, tokenizers
t = tokenizers.Tokenizer.from_file(sys.argv[1])
print(json.dumps([t.encode(s).ids for s in json.load(sys.stdin)]))`, path)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("%s cannot run tokenizers: %v", py, err)
	}
	var ids [][]int
	if err := json.Unmarshal(out, &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

func BenchmarkGGUFTokenizerEncode(b *testing.B) {
	tok, err := LoadGGUFTokenizer(mustOpen(b, filepath.Join("testdata", "tiny-bpe.gguf")))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("The interesting thing in the inner thinking, 12345 times. ", 50)
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
}

// FuzzGGUFTokenizer: Encode never panics, its ids are in range, and decoding
// them gives the text back whenever the text is valid UTF-8 and uses no
// byte the fixture's vocabulary lacks (0x04, 0x13, 0xF1).
func FuzzGGUFTokenizer(f *testing.F) {
	tok, err := LoadGGUFTokenizer(mustOpen(f, filepath.Join("testdata", "tiny-bpe.gguf")))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"Hello world 12345", "<|im_start|>user\n<think>x</think><|im_end|>", "  a\n\n b  ", "café 🤗", "\xF0\x9F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsAny(s, "\x04\x13") && !containsF1(s) {
			if d := tok.Decode(ids, false); d != s {
				t.Fatalf("Decode(Encode(%q)) = %q", s, d)
			}
		}
	})
}

// containsF1 reports whether s's UTF-8 has the byte 0xF1 (runes U+40000..U+7FFFF).
func containsF1(s string) bool { return strings.IndexByte(s, 0xF1) >= 0 }

func mustOpen(tb testing.TB, path string) *gguf.File {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
