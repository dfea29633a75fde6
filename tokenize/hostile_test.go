package tokenize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
)

// tinyJSON is a complete BERT tokenizer.json of about 500 bytes; vocab and padding are spliced
// in.
func tinyJSON(vocab, padding string) []byte {
	return fmt.Appendf(nil, `{"version":"1.0","truncation":null,"padding":%s,"added_tokens":[],
"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
"pre_tokenizer":{"type":"BertPreTokenizer"},
"post_processor":{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]},
"decoder":{"type":"WordPiece","prefix":"##","cleanup":true},
"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
"vocab":{%s}}}`, padding, vocab)
}

const tinySpecials = `"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3,"[MASK]":4`

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadHostileIDs holds the ids of issue 19: each used to panic, allocate gigabytes or end
// the process; now each is one line naming the file, the field, the token and the id, and the
// load allocates little.
func TestLoadHostileIDs(t *testing.T) {
	if tk, err := Load(writeTemp(t, "tokenizer.json", tinyJSON(tinySpecials+`,"foo":5`, "null"))); err != nil || tk.VocabSize() != 6 {
		t.Fatalf("the valid base file: %v", err)
	}
	for _, id := range []string{"9223372036854775807", "4611686018427387904", "100000000", "10000000000", "6"} {
		path := writeTemp(t, "tokenizer.json", tinyJSON(tinySpecials+`,"foo":`+id, "null"))
		var err error
		memcheck.Bounded(t, "id "+id, func() { _, err = Load(path) })
		want := fmt.Sprintf(`%s: model.vocab: id %s of "foo" is out of range`, path, id)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("id %s: error %v, want one line containing %q", id, err, want)
		}
	}
	added := `[{"id":10000000000,"content":"[X]","special":true}]`
	path := writeTemp(t, "tokenizer.json", []byte(strings.Replace(string(tinyJSON(tinySpecials, "null")), `"added_tokens":[]`, `"added_tokens":`+added, 1)))
	var err error
	memcheck.Bounded(t, "added id", func() { _, err = Load(path) })
	if want := `added_tokens[0] "[X]": id 10000000000 is out of range`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("added token id: error %v, want %q", err, want)
	}
}

// TestPadTokenRoundTrip: a pad token other than [PAD] survives Save and Load, and so does Decode.
func TestPadTokenRoundTrip(t *testing.T) {
	vocab := `"[UNK]":0,"[CLS]":2,"[SEP]":3,"[MASK]":4,"<pad>":1,"[PAD]":5,"foo":6`
	tk, err := Load(writeTemp(t, "tokenizer.json", tinyJSON(vocab, `{"pad_token":"<pad>"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if tk.PadID() != 1 {
		t.Fatalf("pad id %d, want 1", tk.PadID())
	}
	back, _ := roundTrip(t, tk)
	ids := []int{2, 6, 5, 3, 1, 1}
	if back.PadID() != tk.PadID() || back.Decode(ids) != tk.Decode(ids) {
		t.Errorf("after Save and Load: pad id %d, Decode %q; want %d, %q", back.PadID(), back.Decode(ids), tk.PadID(), tk.Decode(ids))
	}
	// A pad_id that contradicts the pad token is refused.
	path := writeTemp(t, "tokenizer.json", tinyJSON(vocab, `{"pad_token":"<pad>","pad_id":5}`))
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), `padding.pad_id: 5, but pad_token "<pad>" has id 1`) {
		t.Errorf("contradicting pad_id: error %v", err)
	}
}
