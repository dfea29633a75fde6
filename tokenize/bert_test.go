package tokenize

import (
	"slices"
	"testing"

	"github.com/sugarme/tokenizer/pretrained"
)

func TestEncodeKnownStrings(t *testing.T) {
	tk := bert(t, false)
	// Ids checked against the Hugging Face tokenizers library.
	tests := []struct {
		text string
		want []int
	}{
		{"hello world", []int{101, 7592, 2088, 102}},
		{"Héllo café naïve", []int{101, 7592, 7668, 15743, 102}}, // accents stripped
		{"unaffable [SEP] x", []int{101, 14477, 20961, 3468, 102, 1060, 102}},
		{"x[CLS]y", []int{101, 1060, 101, 1061, 102}}, // special tokens match inside words
		{"北京 is big", []int{101, 1781, 1755, 2003, 2502, 102}},
		{"", []int{101, 102}},
	}
	for _, tt := range tests {
		if got := framed(tk, tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.text, got, tt.want)
		}
	}
	if tk.PadID() != 0 || tk.UnkID() != 100 || tk.CLSID() != 101 || tk.SEPID() != 102 || tk.MaskID() != 103 || tk.VocabSize() != 30522 {
		t.Errorf("special ids pad %d unk %d cls %d sep %d mask %d, V %d; want 0 100 101 102 103, 30522",
			tk.PadID(), tk.UnkID(), tk.CLSID(), tk.SEPID(), tk.MaskID(), tk.VocabSize())
	}
}

// TestEncodeMatchesHuggingFace compares with the ids Hugging Face gives for
// hand-picked strings (accents, CJK, controls, emoji, long words, added
// tokens) and for the Cranfield queries and first 100 passages.
func TestEncodeMatchesHuggingFace(t *testing.T) {
	tk, g := bert(t, false), loadGolden(t)
	if len(g.Bert.Texts) < 300 {
		t.Fatalf("golden holds %d texts", len(g.Bert.Texts))
	}
	for i, text := range g.Bert.Texts {
		if got := framed(tk, text); !slices.Equal(got, g.Bert.IDs[i]) {
			t.Errorf("text %d %q:\n got %v\nwant %v", i, text, got, g.Bert.IDs[i])
		}
	}
}

// TestEncodeMatchesSugarme compares with github.com/sugarme/tokenizer on
// every Cranfield passage and query (ASCII, where sugarme's ignoring
// strip_accents makes no difference).
func TestEncodeMatchesSugarme(t *testing.T) {
	ref, err := pretrained.FromFile(bertPath)
	if err != nil {
		t.Fatal(err)
	}
	ref.WithTruncation(nil)
	ref.WithPadding(nil)
	tk := bert(t, false)
	texts := append(cranfield(t, "queries.jsonl"), cranfield(t, "corpus.jsonl")...)
	if len(texts) != 1625 {
		t.Fatalf("read %d Cranfield texts, want 1625", len(texts))
	}
	if testing.Short() {
		texts = texts[:425] // sugarme needs ~2 ms a passage
	}
	for i, text := range texts {
		enc, err := ref.EncodeSingle(text, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := framed(tk, text); !slices.Equal(got, enc.Ids) {
			t.Fatalf("text %d %q:\n got %v\nwant %v", i, text, got, enc.Ids)
		}
	}
}

func TestEncodeLongWordIsUnknown(t *testing.T) {
	tk := bert(t, false)
	long := make([]byte, 101)
	for i := range long {
		long[i] = 'a'
	}
	if got := tk.Encode(string(long)); !slices.Equal(got, []int{tk.UnkID()}) {
		t.Errorf("101-char word: got %v, want [UNK]", got)
	}
	if got := tk.Encode(string(long[:100])); slices.Contains(got, tk.UnkID()) {
		t.Errorf("100-char word: got %v, want pieces without [UNK]", got)
	}
	// A word whose tail no piece covers is one [UNK], not a partial split.
	if got := tk.Encode("hello\u2603"); !slices.Equal(got, []int{tk.UnkID()}) {
		t.Errorf("uncoverable word: got %v, want [UNK]", got)
	}
}

func TestDecode(t *testing.T) {
	tk, g := bert(t, false), loadGolden(t)
	if got := tk.Decode(g.Decode.IDs); got != g.Decode.Text {
		t.Errorf("Decode(%v) = %q, want %q", g.Decode.IDs, got, g.Decode.Text)
	}
	tests := []struct {
		ids  []int
		want string
	}{
		{[]int{101, 7592, 2088, 102, 0, 0}, "hello world"},
		{[]int{7592, 103, 100}, "hello [MASK] [UNK]"},
		{[]int{7592, 1012, 999999}, "hello. [UNK]"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := tk.Decode(tt.ids); got != tt.want {
			t.Errorf("Decode(%v) = %q, want %q", tt.ids, got, tt.want)
		}
	}
}
