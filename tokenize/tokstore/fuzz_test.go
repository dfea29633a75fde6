package tokstore

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen opens arbitrary bytes as a store: one that opens reads every passage's id and
// tokens without panicking, and every token is inside the vocabulary.
func FuzzOpen(f *testing.F) {
	for _, vocab := range []int{100, 1 << 17} {
		path := filepath.Join(f.TempDir(), "seed.tok")
		w, err := Create(path, vocab)
		if err != nil {
			f.Fatal(err)
		}
		w.Add("a", []int{1, 2, 3})
		w.Add("b", nil)
		w.Add("c", []int{vocab - 1})
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		f.Add(b)
	}
	path := filepath.Join(f.TempDir(), "fuzz.tok")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			return
		}
		defer s.Close()
		var buf []int
		for i := range s.Len() {
			if s.ID(i) == "" {
				t.Fatalf("passage %d: empty id", i)
			}
			buf = s.Tokens(buf[:0], i)
			if len(buf) != s.NumTokens(i) {
				t.Fatalf("passage %d: %d tokens, NumTokens %d", i, len(buf), s.NumTokens(i))
			}
			for _, tok := range buf {
				if tok < 0 || (s.TokenWidth() == 2 && tok >= 1<<16) {
					t.Fatalf("passage %d: token %d", i, tok)
				}
			}
		}
	})
}
