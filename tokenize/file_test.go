package tokenize

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sugarme/tokenizer/pretrained"
)

// roundTrip saves tk into a temp dir, checks the directory holds only the
// file (no temp file left), and loads it back.
func roundTrip(t *testing.T, tk *Tokenizer) (*Tokenizer, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := tk.Save(path); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "tokenizer.json" {
		t.Fatalf("directory after Save holds %v", entries)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return back, path
}

// sameTokenizer checks ids, specials and encodings of a, b agree.
func sameTokenizer(t *testing.T, a, b *Tokenizer, texts []string) {
	t.Helper()
	if !slices.Equal(a.tokens, b.tokens) {
		t.Fatalf("vocabularies differ (V %d vs %d)", a.VocabSize(), b.VocabSize())
	}
	if a.PadID() != b.PadID() || a.UnkID() != b.UnkID() || a.CLSID() != b.CLSID() || a.SEPID() != b.SEPID() || a.MaskID() != b.MaskID() {
		t.Fatalf("special ids differ")
	}
	ba, bb := a.EncodeBatch(texts, 64), b.EncodeBatch(texts, 64)
	if !slices.Equal(ba.IDs, bb.IDs) || !slices.Equal(ba.Mask, bb.Mask) || ba.Truncated != bb.Truncated {
		t.Fatalf("encodings differ after reload")
	}
}

// sugarmeAgrees checks that github.com/sugarme/tokenizer reads the saved
// file and gives the same ids.
func sugarmeAgrees(t *testing.T, path string, tk *Tokenizer, texts []string) {
	t.Helper()
	ref, err := pretrained.FromFile(path)
	if err != nil {
		t.Fatalf("sugarme cannot read %s: %v", path, err)
	}
	for _, text := range texts {
		enc, err := ref.EncodeSingle(text, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := framed(tk, text); !slices.Equal(got, enc.Ids) {
			t.Fatalf("%q: ours %v, sugarme %v", text, got, enc.Ids)
		}
	}
}

func TestSaveLoadBERT(t *testing.T) {
	tk := bert(t, false)
	back, path := roundTrip(t, tk)
	queries := cranfield(t, "queries.jsonl")
	sameTokenizer(t, tk, back, append(queries, loadGolden(t).Bert.Texts...))
	sugarmeAgrees(t, path, back, queries)

	// The saved file has the Hugging Face layout.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"version": `"1.0"`, "truncation": `null`, "padding": `null`,
		"normalizer":    `{"clean_text":true,"handle_chinese_chars":true,"lowercase":true,"strip_accents":true,"type":"BertNormalizer"}`,
		"pre_tokenizer": `{"type":"BertPreTokenizer"}`,
		"decoder":       `{"cleanup":true,"prefix":"##","type":"WordPiece"}`,
		"added_tokens":  `[{"content":"[PAD]","id":0,"lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true},{"content":"[UNK]","id":100,"lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true},{"content":"[CLS]","id":101,"lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true},{"content":"[SEP]","id":102,"lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true},{"content":"[MASK]","id":103,"lstrip":false,"normalized":false,"rstrip":false,"single_word":false,"special":true}]`,
	} {
		got, _ := json.Marshal(f[key])
		if string(got) != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	model := f["model"].(map[string]any)
	if model["type"] != "WordPiece" || model["unk_token"] != "[UNK]" || model["continuing_subword_prefix"] != "##" ||
		model["max_input_chars_per_word"] != 100.0 || len(model["vocab"].(map[string]any)) != 30522 {
		t.Errorf("model header %v %v %v %v, %d vocab entries", model["type"], model["unk_token"],
			model["continuing_subword_prefix"], model["max_input_chars_per_word"], len(model["vocab"].(map[string]any)))
	}
	// The vocab lists tokens in id order, as Hugging Face writes it.
	if i, j := bytes.Index(data, []byte(`"[unused0]": 1,`)), bytes.Index(data, []byte(`"[unused1]": 2,`)); i < 0 || j < i {
		t.Errorf("vocab not in id order")
	}

	// Saving the reloaded tokenizer gives the same bytes.
	again, err := back.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("save → load → save changed the file")
	}
}

func TestSaveLoadTrained(t *testing.T) {
	passages := cranfield(t, "corpus.jsonl")
	tk, err := Train(passages[:300], TrainOptions{VocabSize: 3000, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	back, path := roundTrip(t, tk)
	queries := cranfield(t, "queries.jsonl")
	sameTokenizer(t, tk, back, append(queries, passages...))
	sugarmeAgrees(t, path, back, queries)
}

func TestAddSpecialTokens(t *testing.T) {
	tk, g := bert(t, true), loadGolden(t)
	before := slices.Clone(tk.tokens)
	ids, err := tk.AddSpecialTokens(g.SelfRAG.Added)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, g.SelfRAG.AddedIDs) || !slices.Equal(ids, []int{30522, 30523}) || tk.VocabSize() != 30524 {
		t.Fatalf("ids %v V %d, want %v (Hugging Face) and V 30524", ids, tk.VocabSize(), g.SelfRAG.AddedIDs)
	}
	if !slices.Equal(tk.tokens[:len(before)], before) {
		t.Fatal("old ids changed")
	}
	check := func(tk *Tokenizer, what string) {
		t.Helper()
		for i, text := range g.SelfRAG.Texts {
			if got := framed(tk, text); !slices.Equal(got, g.SelfRAG.IDs[i]) {
				t.Errorf("%s: %q:\n got %v\nwant %v (Hugging Face)", what, text, got, g.SelfRAG.IDs[i])
			}
		}
	}
	check(tk, "after adding")
	back, path := roundTrip(t, tk)
	check(back, "after reload")
	sameTokenizer(t, tk, back, g.SelfRAG.Texts)
	// sugarme mis-matches two different added tokens side by side ("[No
	// Retrieve] [Retrieve]"), so it is given simpler texts.
	sugarmeAgrees(t, path, back, []string{"[Retrieve] hello", "x [No Retrieve] y", "[Retrieve] hello[No Retrieve]world"})

	if got := tk.Decode([]int{30522, 7592, 30523}); got != "[Retrieve] hello [No Retrieve]" {
		t.Errorf("Decode = %q", got)
	}

	// Adding again, or adding existing tokens, keeps every id.
	again, err := tk.AddSpecialTokens([]string{"[No Retrieve]", "[MASK]", "hello", "[Retrieve]"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{30523, 103, 7592, 30522}; !slices.Equal(again, want) || tk.VocabSize() != 30524 {
		t.Errorf("re-adding: ids %v V %d, want %v V 30524", again, tk.VocabSize(), want)
	}
	// "hello" is now special: matched in raw text, even inside a word
	// ("ot" = 27178); "Hello" still normalises to the vocabulary's hello.
	if got, want := tk.Encode("othello Hello"), []int{27178, 7592, 7592}; !slices.Equal(got, want) {
		t.Errorf("special 'hello': got %v, want %v", got, want)
	}

	if _, err := tk.AddSpecialTokens([]string{"[Ok]", ""}); err == nil || tk.VocabSize() != 30524 {
		t.Errorf("empty token: err %v, V %d; want an error and nothing added", err, tk.VocabSize())
	}
	back, _ = roundTrip(t, tk)
	sameTokenizer(t, tk, back, []string{"othello Hello [Retrieve]"})
}

func TestLoadErrors(t *testing.T) {
	base, err := os.ReadFile("testdata/cranfield-8000.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	vocab := func(m map[string]any) map[string]any { return model(m)["vocab"].(map[string]any) }
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"syntax", []byte("{\n\"version\": \"1.0\",\n\"model\": {,\n}"), ".json:3: invalid character ','"},
		{"type", []byte("{\n\"model\": {\"vocab\": [1, 2]}}"), ".json:2: json: cannot unmarshal array"},
		{"no model", []byte(`{"version": "1.0"}`), "model: missing"},
		{"BPE", edit(func(m map[string]any) { model(m)["type"] = "BPE" }), `model.type: "BPE" is not supported`},
		{"gap", edit(func(m map[string]any) { delete(vocab(m), "##ug") }), "ids are not contiguous"},
		{"no unk", edit(func(m map[string]any) { model(m)["unk_token"] = "<unk>" }), `model.unk_token "<unk>" is not in the vocabulary`},
		{"no mask", edit(func(m map[string]any) {
			vocab(m)["[MASKED]"] = vocab(m)["[MASK]"]
			delete(vocab(m), "[MASK]")
			m["added_tokens"] = m["added_tokens"].([]any)[:4]
		}), `mask token "[MASK]" is not in the vocabulary`},
		{"normalizer", edit(func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }), `normalizer: "NFKC" is not supported`},
		{"pre_tokenizer", edit(func(m map[string]any) { m["pre_tokenizer"] = nil }), `pre_tokenizer: null is not supported`},
		{"post null", edit(func(m map[string]any) { m["post_processor"] = nil }), `post_processor: null`},
		{"post layout", edit(func(m map[string]any) {
			pp := m["post_processor"].(map[string]any)
			pp["single"] = pp["single"].([]any)[1:]
		}), `post_processor.single: "$A:0 [SEP]:0" is not the BERT layout`},
		{"post ids", edit(func(m map[string]any) {
			st := m["post_processor"].(map[string]any)["special_tokens"].(map[string]any)
			st["[CLS]"].(map[string]any)["ids"] = []any{7}
		}), `special_tokens["[CLS]"]: token "[CLS]" with id 7 does not match`},
		{"added id", edit(func(m map[string]any) {
			m["added_tokens"].([]any)[0].(map[string]any)["id"] = 9
		}), `added_tokens[0] "[PAD]": id 9 but model.vocab gives 0`},
		{"added normalized", edit(func(m map[string]any) {
			m["added_tokens"].([]any)[1].(map[string]any)["normalized"] = true
		}), `added_tokens[1] "[UNK]": normalized, lstrip, rstrip and single_word must be false`},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
		if err := os.WriteFile(path, tt.data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v\nwant one naming %s and containing %q", tt.name, err, path, tt.want)
		}
	}
	missing := filepath.Join(dir, "absent", "tokenizer.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: error %v", err)
	}
}

func TestLoadBertProcessing(t *testing.T) {
	data, err := os.ReadFile("testdata/cranfield-8000.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["post_processor"] = map[string]any{"type": "BertProcessing", "sep": []any{"[SEP]", 3}, "cls": []any{"[CLS]", 2}}
	out, _ := json.Marshal(m)
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tk.CLSID() != 2 || tk.SEPID() != 3 {
		t.Errorf("cls %d sep %d, want 2 3", tk.CLSID(), tk.SEPID())
	}
}

func TestSaveErrorNamesPath(t *testing.T) {
	tk := bert(t, false)
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "tokenizer.json")
	if err := tk.Save(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Save into a missing directory: error %v, want one naming %s", err, path)
	}
}
