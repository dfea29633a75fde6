// Package gardentest holds test helpers of the garden-world packages (ragreader, ragjoint and
// the garden kinds under experiment/).
package gardentest

import (
	"testing"

	"github.com/ragtrain/ragtrain/tokenize"
)

// Tokenizer trains a small WordPiece vocabulary on garden-like text with the reader's special
// tokens (specials).
func Tokenizer(t *testing.T, specials ...string) *tokenize.Tokenizer {
	t.Helper()
	texts := []string{
		"Ada Besa lives in Kelso . Ada Besa grows fig . Ada Besa keeps dog .",
		"Kai Ligeku walked rabbit with Ada Besa .", "where does Ada Besa live ?",
		"what does Kai Ligeku grow ?", "Kai Ligeku lives in Larkhill .",
	}
	tok, err := tokenize.Train(texts, tokenize.TrainOptions{VocabSize: 300, MinFrequency: 1, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.AddSpecialTokens(specials); err != nil {
		t.Fatal(err)
	}
	return tok
}
