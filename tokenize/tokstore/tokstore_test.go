package tokstore_test

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tokenize/tokstore"
)

// TestCranfieldRoundTrip streams Cranfield through the BERT tokenizer into a store, maps it
// and checks every passage's id and tokens, the exact file size (2 bytes a token), and that
// batches built from the store equal EncodeBatch of the texts.
func TestCranfieldRoundTrip(t *testing.T) {
	tk, err := tokenize.Load("../../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "passages.tok")
	w, err := tokstore.Create(path, tk.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	r, err := data.OpenCorpus("../../datasets/cranfield/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var ids, texts []string
	total, idBytes := 0, 0
	for {
		d, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tokens := tk.Encode(d.Passage(true))
		if err := w.Add(d.ID, tokens); err != nil {
			t.Fatal(err)
		}
		ids, texts = append(ids, d.ID), append(texts, d.Passage(true))
		total += len(tokens)
		idBytes += len(d.ID)
	}
	r.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("store visible before Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := tokstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := len(ids)
	if s.Len() != 1400 || n != 1400 || s.TokenWidth() != 2 || s.VocabSize() != 30522 {
		t.Fatalf("Len %d, width %d, vocab %d", s.Len(), s.TokenWidth(), s.VocabSize())
	}
	st, _ := os.Stat(path)
	tokEnd := 64 + 2*total
	want := tokEnd + (8-tokEnd%8)%8 + 16*(n+1) + idBytes
	if st.Size() != int64(want) {
		t.Fatalf("file is %d bytes, want %d (64 + 2·%d tokens + pad + 16·%d + %d id bytes)", st.Size(), want, total, n+1, idBytes)
	}
	var buf []int
	for i := range n {
		buf = s.Tokens(buf[:0], i)
		if s.ID(i) != ids[i] || !slices.Equal(buf, tk.Encode(texts[i])) || s.NumTokens(i) != len(buf) {
			t.Fatalf("passage %d (%s): stored tokens or id differ", i, ids[i])
		}
	}
	for lo := 0; lo < n; lo += 256 {
		hi := min(lo+256, n)
		rows := make([][]int, 0, hi-lo)
		for i := lo; i < hi; i++ {
			rows = append(rows, s.Tokens(nil, i))
		}
		if got, want := tk.BatchOf(rows, 128), tk.EncodeBatch(texts[lo:hi], 128); !reflect.DeepEqual(got, want) {
			t.Fatalf("batch %d..%d from the store differs from EncodeBatch", lo, hi-1)
		}
	}
}

// TestWideTokens: a vocabulary over 65,536 ids stores 4 bytes a token.
func TestWideTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wide.tok")
	w, err := tokstore.Create(path, 1<<17)
	if err != nil {
		t.Fatal(err)
	}
	rows := [][]int{{0, 65535, 65536, 131071}, {}, {7}}
	for i, row := range rows {
		if err := w.Add(string(rune('a'+i)), row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := tokstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.TokenWidth() != 4 || s.Len() != 3 {
		t.Fatalf("width %d, len %d", s.TokenWidth(), s.Len())
	}
	for i, row := range rows {
		if got := s.Tokens(nil, i); !slices.Equal(got, row) && !(len(got) == 0 && len(row) == 0) {
			t.Fatalf("row %d: %v, want %v", i, got, row)
		}
	}
}

// TestRefusals: bad passages are refused with an error naming the passage, leave the writer
// usable and are absent from the store; a truncated or foreign file fails Open naming it;
// Abort leaves nothing.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.tok")
	w, err := tokstore.Create(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add("a", []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id     string
		tokens []int
		want   string
	}{
		{"b", []int{5, 100}, `passage 1 (id "b"): token 1 is 100, outside the vocabulary [0, 100)`},
		{"b", []int{-1}, `token 0 is -1`},
		{"a", []int{3}, `passage 1 (id "a"): id already added as passage 0`},
		{"", []int{3}, `empty id`},
	} {
		if err := w.Add(tc.id, tc.tokens); err == nil || !strings.Contains(err.Error(), path+": passage 1") ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add(%q, %v): %v, want %q", tc.id, tc.tokens, err, tc.want)
		}
	}
	if err := w.Add("c", []int{99}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := tokstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 2 || s.ID(1) != "c" || !slices.Equal(s.Tokens(nil, 0), []int{1, 2}) || !slices.Equal(s.Tokens(nil, 1), []int{99}) {
		t.Fatalf("store holds %d passages", s.Len())
	}
	s.Close()

	b, _ := os.ReadFile(path)
	cut := filepath.Join(dir, "cut.tok")
	os.WriteFile(cut, b[:len(b)-1], 0o644)
	if _, err := tokstore.Open(cut); err == nil || !strings.Contains(err.Error(), cut+": truncated") {
		t.Errorf("truncated: %v", err)
	}
	os.WriteFile(cut, b[:20], 0o644)
	if _, err := tokstore.Open(cut); err == nil || !strings.Contains(err.Error(), cut+": truncated: 20 bytes") {
		t.Errorf("truncated header: %v", err)
	}
	bad := append([]byte("NOTASTOR"), b[8:]...)
	os.WriteFile(cut, bad, 0o644)
	if _, err := tokstore.Open(cut); err == nil || !strings.Contains(err.Error(), cut+": not a token store") {
		t.Errorf("bad magic: %v", err)
	}
	os.Remove(cut)

	w, err = tokstore.Create(filepath.Join(dir, "aborted.tok"), 10)
	if err != nil {
		t.Fatal(err)
	}
	w.Add("x", []int{1})
	w.Abort()
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 1 || names[0] != path {
		t.Fatalf("files left: %v", names)
	}
}
