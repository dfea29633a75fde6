package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// writeFiles writes name -> content into a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// vocabText is the vocab.txt of tk: its tokens in id order, one a line.
func vocabText(tk *Tokenizer) string {
	var b strings.Builder
	for id := range tk.VocabSize() {
		s, _ := tk.Token(id)
		b.WriteString(s + "\n")
	}
	return b.String()
}

// savedBytes returns what Save writes for tk.
func savedBytes(t *testing.T, tk *Tokenizer) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), JSONFile)
	if err := tk.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameIDs fails unless a and b give every text the same framed ids.
func sameIDs(t *testing.T, a, b *Tokenizer, texts []string) {
	t.Helper()
	for _, text := range texts {
		if x, y := framed(a, text), framed(b, text); !slices.Equal(x, y) {
			t.Fatalf("%q: %v vs %v", text, x, y)
		}
	}
}

// manyTexts is the hand-written edge cases, the golden bert texts and the Cranfield queries.
func manyTexts(t *testing.T) []string {
	g := loadGolden(t)
	var hand []string
	b, err := os.ReadFile("testdata/hand_strings.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &hand); err != nil {
		t.Fatal(err)
	}
	return slices.Concat(hand, g.Bert.Texts, g.SelfRAG.Texts, cranfield(t, "queries.jsonl"))
}

// TestLoadDirVocabMatchesJSONBert: bert-base-uncased as vocab.txt + tokenizer_config.json
// (do_lower_case true, as distributed) builds the tokenizer its tokenizer.json describes: the
// same saved file byte for byte and the same ids on every test text, and the ids of the Hugging
// Face tokenizers library (hf_golden.json).
func TestLoadDirVocabMatchesJSONBert(t *testing.T) {
	ref := bert(t, false)
	dir := writeFiles(t, map[string]string{
		VocabFile:  vocabText(ref),
		ConfigFile: `{"do_lower_case": true, "tokenizer_class": "BertTokenizer", "model_max_length": 512}`,
	})
	tk, what, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, VocabFile) + " with " + filepath.Join(dir, ConfigFile); what != want {
		t.Errorf("source %q, want %q", what, want)
	}
	if savedBytes(t, tk) != savedBytes(t, ref) {
		t.Errorf("the vocab.txt tokenizer saves differently from bert-base-uncased's tokenizer.json")
	}
	sameIDs(t, tk, ref, manyTexts(t))
	g := loadGolden(t)
	for i, text := range g.Bert.Texts {
		if got := framed(tk, text); !slices.Equal(got, g.Bert.IDs[i]) {
			t.Fatalf("%q: %v, Hugging Face %v", text, got, g.Bert.IDs[i])
		}
	}
}

// pretrainedDir returns the directory of a checkpoint fetched by tools/pretrained/get.sh:
// $RAGTRAIN_PRETRAINED/name, else <repo>/pretrained/name; the test is skipped when it is absent.
func pretrainedDir(t *testing.T, name string) string {
	t.Helper()
	root := os.Getenv("RAGTRAIN_PRETRAINED")
	if root == "" {
		root = "../pretrained"
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("%s is absent (bash tools/pretrained/get.sh %s, or set RAGTRAIN_PRETRAINED)", dir, name)
	}
	return dir
}

// TestLoadDirMiniLM: all-MiniLM-L6-v2's vocab.txt, tokenizer_config.json and
// special_tokens_map.json, without its tokenizer.json, build the tokenizer its tokenizer.json
// describes (saved bytes and ids on every test text).
func TestLoadDirMiniLM(t *testing.T) {
	src := pretrainedDir(t, "all-MiniLM-L6-v2")
	files := map[string]string{}
	for _, name := range []string{VocabFile, ConfigFile, SpecialTokensFile} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	dir := writeFiles(t, files)
	tk, what, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(what, SpecialTokensFile) {
		t.Errorf("source %q does not name %s", what, SpecialTokensFile)
	}
	ref, refWhat, err := LoadDir(src)
	if err != nil || refWhat != filepath.Join(src, JSONFile) {
		t.Fatalf("%s: %v (%s)", src, err, refWhat)
	}
	if savedBytes(t, tk) != savedBytes(t, ref) {
		t.Errorf("the vocab.txt tokenizer saves differently from MiniLM's tokenizer.json")
	}
	sameIDs(t, tk, ref, manyTexts(t))
}

// handGolden is testdata/handvocab_golden.json (gen_handvocab.py, transformers' AutoTokenizer).
type handGolden struct {
	Texts    []string `json:"texts"`
	Variants []struct {
		Name             string          `json:"name"`
		TokenizerConfig  json.RawMessage `json:"tokenizer_config"`
		SpecialTokensMap json.RawMessage `json:"special_tokens_map"`
		VocabSize        int             `json:"vocab_size"`
		IDs              [][]int         `json:"ids"`
	} `json:"variants"`
}

// TestLoadDirHandVocab: the hand-made vocabulary of testdata/handvocab with three settings
// (uncased; cased without CJK splitting and an additional special token outside the vocabulary;
// cased with accent stripping and [unused0] as the unknown token from special_tokens_map.json)
// gives the ids transformers gives.
func TestLoadDirHandVocab(t *testing.T) {
	var g handGolden
	b, err := os.ReadFile("testdata/handvocab_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	vocab, err := os.ReadFile("testdata/handvocab/vocab.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Variants) != 3 || len(g.Texts) < 30 {
		t.Fatalf("golden file: %d variants, %d texts", len(g.Variants), len(g.Texts))
	}
	for _, v := range g.Variants {
		files := map[string]string{VocabFile: string(vocab), ConfigFile: string(v.TokenizerConfig)}
		if string(v.SpecialTokensMap) != "null" {
			files[SpecialTokensFile] = string(v.SpecialTokensMap)
		}
		tk, _, err := LoadDir(writeFiles(t, files))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if tk.VocabSize() != v.VocabSize {
			t.Errorf("%s: vocabulary %d, transformers %d", v.Name, tk.VocabSize(), v.VocabSize)
		}
		for i, text := range g.Texts {
			if got := framed(tk, text); !slices.Equal(got, v.IDs[i]) {
				t.Errorf("%s: %q: %v, transformers %v", v.Name, text, got, v.IDs[i])
			}
		}
		// Saved as tokenizer.json and loaded back, it is the same tokenizer.
		back, _ := roundTrip(t, tk)
		sameIDs(t, tk, back, g.Texts)
	}
}

// TestLoadVocabLines: line endings as Python's universal newlines read them, and the special
// tokens' ids.
func TestLoadVocabLines(t *testing.T) {
	dir := writeFiles(t, map[string]string{VocabFile: "[UNK]\r\n[PAD]\r[CLS]\n[SEP]\n[MASK]\nhello\n##s"})
	tk, err := LoadVocab(filepath.Join(dir, VocabFile), DefaultVocabOptions())
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != 7 || tk.UnkID() != 0 || tk.PadID() != 1 || tk.CLSID() != 2 || tk.SEPID() != 3 || tk.MaskID() != 4 {
		t.Fatalf("V %d, unk %d pad %d cls %d sep %d mask %d", tk.VocabSize(), tk.UnkID(), tk.PadID(), tk.CLSID(), tk.SEPID(), tk.MaskID())
	}
	if got := framed(tk, "HELLOS [MASK]x"); !slices.Equal(got, []int{2, 5, 6, 4, 0, 3}) {
		t.Errorf("ids %v", got)
	}
}

// TestLoadDirErrors: each bad directory is one line naming the file and the field or line.
func TestLoadDirErrors(t *testing.T) {
	const specials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string // with FILE for the path of the file at fault
	}{
		{"no files", map[string]string{}, "has no tokenizer.json and no vocab.txt"},
		{"duplicate", map[string]string{VocabFile: specials + "a\nb\na\n"}, "FILE:8: token \"a\" is also on line 6"},
		{"empty line", map[string]string{VocabFile: specials + "a\n\nb\n"}, "FILE:7: empty token (id 6)"},
		{"bad utf-8", map[string]string{VocabFile: specials + "a\xff\n"}, "FILE:6: not valid UTF-8"},
		{"empty file", map[string]string{VocabFile: ""}, "FILE: the vocabulary is empty"},
		{"no mask", map[string]string{VocabFile: "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"}, `FILE: mask_token "[MASK]" is not in the vocabulary`},
		{"renamed unk", map[string]string{VocabFile: specials, ConfigFile: `{"unk_token": "<unk>"}`}, `unk_token "<unk>" is not in the vocabulary`},
		{"class", map[string]string{VocabFile: specials, ConfigFile: `{"tokenizer_class": "RobertaTokenizer"}`},
			`FILE: tokenizer_class = "RobertaTokenizer"; this toolkit implements BERT's WordPiece tokenizer`},
		{"bad json", map[string]string{VocabFile: specials, ConfigFile: "{\n\"do_lower_case\": 3}"}, "FILE:2: json: cannot unmarshal"},
		{"token type", map[string]string{VocabFile: specials, SpecialTokensFile: `{"cls_token": 7}`}, `FILE: cls_token: want a token`},
		{"empty token", map[string]string{VocabFile: specials, SpecialTokensFile: `{"sep_token": ""}`}, `FILE: sep_token is empty`},
		{"extra null", map[string]string{VocabFile: specials, ConfigFile: `{"additional_special_tokens": [null]}`}, `FILE: additional_special_tokens: [0]: null`},
		{"added other token", map[string]string{VocabFile: specials, ConfigFile: `{"added_tokens_decoder": {"1": {"content": "[CLS]", "special": true}}}`},
			`FILE: added_tokens_decoder["1"] is "[CLS]", but`},
		{"added gap", map[string]string{VocabFile: specials, ConfigFile: `{"added_tokens_decoder": {"99999999999": {"content": "<x>", "special": true}}}`},
			`FILE: added_tokens_decoder["99999999999"] "<x>": the ids after the 5 tokens`},
		{"added huge", map[string]string{VocabFile: specials, ConfigFile: `{"added_tokens_decoder": {"99999999999999999999999": {"content": "<x>", "special": true}}}`},
			`FILE: added_tokens_decoder["99999999999999999999999"]: the key is not an id`},
		{"added not special", map[string]string{VocabFile: specials, ConfigFile: `{"added_tokens_decoder": {"5": {"content": "<x>", "special": false}}}`},
			`FILE: added_tokens_decoder["5"] "<x>": special = false`},
		{"added normalized", map[string]string{VocabFile: specials, ConfigFile: `{"added_tokens_decoder": {"5": {"content": "<x>", "special": true, "lstrip": true}}}`},
			`FILE: added_tokens_decoder["5"] "<x>": normalized, lstrip, rstrip and single_word must be false`},
		{"added in vocab", map[string]string{VocabFile: specials + "<x>\n", ConfigFile: `{"added_tokens_decoder": {"6": {"content": "<x>", "special": true}}}`},
			`FILE: added_tokens_decoder["6"] "<x>": already in`},
		{"added_tokens.json", map[string]string{VocabFile: specials, AddedTokensFile: `{"<x>": 5}`}, "FILE: added tokens are not read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, c.files)
			var err error
			memcheck.Bounded(t, c.name, func() { _, _, err = LoadDir(dir) })
			file := VocabFile
			for _, name := range []string{ConfigFile, SpecialTokensFile, AddedTokensFile} {
				if _, ok := c.files[name]; ok {
					file = name
				}
			}
			want := strings.ReplaceAll(c.want, "FILE", filepath.Join(dir, file))
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line containing %q", err, want)
			}
		})
	}
}

// TestLoadDirAdded: added_tokens_decoder entries inside the vocabulary become special tokens;
// entries after it take their ids; additional_special_tokens outside it follow.
func TestLoadDirAdded(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		VocabFile: "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n<in>\nx\n",
		ConfigFile: `{"added_tokens_decoder": {"5": {"content": "<in>", "special": true}, "8": {"content": "<b>", "special": true},
			"7": {"content": "<a>", "special": true}}, "additional_special_tokens": ["<c>", {"content": "<in>"}]}`,
	})
	tk, _, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{"<in>": 5, "<a>": 7, "<b>": 8, "<c>": 9} {
		if id, ok := tk.ID(tok); !ok || id != want {
			t.Errorf("%s: id %d, %v; want %d", tok, id, ok, want)
		}
	}
	if got := tk.Encode("x<in>x<a><c>"); !slices.Equal(got, []int{6, 5, 6, 7, 9}) {
		t.Errorf("ids %v", got)
	}
	if tk.VocabSize() != 10 {
		t.Errorf("V %d", tk.VocabSize())
	}
}
