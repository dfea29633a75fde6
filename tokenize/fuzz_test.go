package tokenize

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// smallTokenizerJSON returns the shipped Cranfield tokenizer cut to its first n ids (a seed
// small enough to mutate quickly).
func smallTokenizerJSON(f *testing.F, n int) []byte {
	data, err := os.ReadFile("testdata/cranfield-8000.tokenizer.json")
	if err != nil {
		f.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		f.Fatal(err)
	}
	vocab := m["model"].(map[string]any)["vocab"].(map[string]any)
	for tok, id := range vocab {
		if id.(float64) >= float64(n) {
			delete(vocab, tok)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	return out
}

// FuzzTokenizerJSON loads arbitrary tokenizer.json bytes. A file that loads must have dense
// ids in range (every id names one token, whose id it is), special ids in range, encodings
// within the vocabulary, and must save and load back to the same tokenizer.
func FuzzTokenizerJSON(f *testing.F) {
	f.Add(smallTokenizerJSON(f, 64))
	f.Add(tinyJSON(tinySpecials+`,"foo":5,"##o":6`, "null"))
	f.Add(tinyJSON(`"[UNK]":0,"[CLS]":2,"[SEP]":3,"[MASK]":4,"<pad>":1,"[PAD]":5,"foo":6`, `{"pad_token":"<pad>"}`))
	f.Add(tinyJSON(tinySpecials+`,"foo":9223372036854775807`, "null"))
	f.Add([]byte(`{"added_tokens":[{"id":5,"content":"[X]","special":true}],"model":{"vocab":{"a":0}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := parse("tokenizer.json", data)
		if err != nil {
			return
		}
		checkDense(t, tk)
		text := "foo bar ##o [SEP] x"
		ids := tk.EncodeBatch([]string{text}, 32).IDs
		for _, id := range ids {
			if _, ok := tk.Token(int(id)); !ok {
				t.Fatalf("encoding %q gave id %d, vocabulary of %d", text, id, tk.VocabSize())
			}
		}
		out, err := tk.marshal()
		if err != nil {
			t.Fatalf("marshal of a loaded tokenizer: %v", err)
		}
		back, err := parse("saved.json", out)
		if err != nil {
			t.Fatalf("a saved tokenizer does not load: %v\n%s", err, out)
		}
		if !slices.Equal(tk.tokens, back.tokens) || tk.PadID() != back.PadID() || tk.UnkID() != back.UnkID() ||
			tk.CLSID() != back.CLSID() || tk.SEPID() != back.SEPID() || tk.MaskID() != back.MaskID() {
			t.Fatalf("save then load changed the vocabulary or the special ids")
		}
		if got := back.EncodeBatch([]string{text}, 32).IDs; !slices.Equal(got, ids) {
			t.Fatalf("save then load changed the encoding of %q: %v, then %v", text, ids, got)
		}
		if a, b := tk.Decode([]int{0, 1, 2, 3, 4, 5}), back.Decode([]int{0, 1, 2, 3, 4, 5}); a != b {
			t.Fatalf("save then load changed Decode: %q, then %q", a, b)
		}
	})
}

// checkDense asserts that every id in [0, V) names one token whose id it is.
func checkDense(t *testing.T, tk *Tokenizer) {
	t.Helper()
	v := tk.VocabSize()
	if v == 0 {
		t.Fatal("a loaded tokenizer has no ids")
	}
	for id := range v {
		tok, ok := tk.Token(id)
		if !ok {
			t.Fatalf("id %d of %d has no token", id, v)
		}
		if back, ok := tk.ID(tok); !ok || back != id {
			t.Fatalf("token %q has id %d, but ID gives %d", tok, id, back)
		}
	}
	for name, id := range map[string]int{"pad": tk.PadID(), "unk": tk.UnkID(), "cls": tk.CLSID(), "sep": tk.SEPID(), "mask": tk.MaskID()} {
		if id < 0 || id >= v {
			t.Fatalf("%s id %d out of [0, %d)", name, id, v)
		}
	}
}
