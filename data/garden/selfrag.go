package garden

import (
	"math/rand/v2"
	"strings"
)

// InventSurname draws a surname of the world's pattern (2 or 3 consonant-vowel syllables,
// capitalised: "Zerimo") that is not an English or template word, for training examples that
// rename a gardener (counterfactual names: a reader that must judge whether a passage is about
// the asked gardener cannot then memorise which names go together, and has to compare them).
// It may equal a surname of some world; callers that need a fresh one check.
func InventSurname(rng *rand.Rand) string {
	bad := rejectedSurnames()
	var b strings.Builder
	for {
		b.Reset()
		for range 2 + rng.IntN(2) {
			b.WriteByte(surnameConsonants[rng.IntN(len(surnameConsonants))])
			b.WriteByte(surnameVowels[rng.IntN(len(surnameVowels))])
		}
		if s := b.String(); !bad[s] {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
}
