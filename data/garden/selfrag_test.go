package garden

import (
	"math/rand/v2"
	"testing"
)

func TestInventSurname(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	bad := rejectedSurnames()
	seen := map[string]bool{}
	for range 500 {
		s := InventSurname(rng)
		if n := len(s); n != 4 && n != 6 {
			t.Fatalf("surname %q: %d letters, want 4 or 6", s, n)
		}
		for i, c := range s[1:] {
			set := surnameVowels
			if i%2 == 1 {
				set = surnameConsonants
			}
			if !containsRune(set, c) {
				t.Fatalf("surname %q breaks the consonant-vowel pattern at %d", s, i+1)
			}
		}
		if bad[lowerASCII(s)] {
			t.Fatalf("surname %q is a rejected word", s)
		}
		seen[s] = true
	}
	if len(seen) < 400 {
		t.Errorf("%d distinct surnames in 500 draws", len(seen))
	}
}

func containsRune(s string, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
