package tokenize

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestReflectionTokens: the seven reflection tokens get the next free ids in order, each
// encodes as one id inside a lowercasing tokenizer's text, old ids are unchanged, and a saved
// tokenizer.json reloads with them.
func TestReflectionTokens(t *testing.T) {
	tk := bert(t, true)
	v0 := tk.VocabSize()
	before := tk.Encode("where does ines live ?")
	ids, err := tk.AddSpecialTokens(ReflectionTokens())
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != v0+i {
			t.Errorf("token %d got id %d, want %d", i, id, v0+i)
		}
	}
	if got := tk.Encode("where does ines live ?"); !slices.Equal(got, before) {
		t.Errorf("old text re-encoded as %v, was %v", got, before)
	}
	text := "where does ines live ? [Relevant] ines lives in paris [Fully supported]"
	got := tk.Encode(text)
	if got[len(before)] != ids[2] || got[len(got)-1] != ids[4] {
		t.Errorf("Encode(%q) = %v, want [Relevant] = %d after the question and [Fully supported] = %d last", text, got, ids[2], ids[4])
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := tk.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range ReflectionTokens() {
		if id, ok := back.ID(tok); !ok || id != ids[i] {
			t.Errorf("reloaded %s: id %d, %v; want %d", tok, id, ok, ids[i])
		}
	}
	if g := back.Encode(text); !slices.Equal(g, got) {
		t.Errorf("reloaded Encode = %v, want %v", g, got)
	}
}
