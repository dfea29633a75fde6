package tokenize

import (
	"errors"

	"github.com/ragtrain/ragtrain/gguf"
)

// GGUFTokenizer is the byte-level BPE tokenizer stored in a GGUF file's
// metadata (work in progress: the API is fixed, the implementation lands next).
type GGUFTokenizer struct {
	tokens        []string
	bos, eos, pad int
}

// LoadGGUFTokenizer builds the tokenizer from f's tokenizer.ggml.* metadata.
func LoadGGUFTokenizer(f *gguf.File) (*GGUFTokenizer, error) {
	return nil, errors.New("tokenize: GGUF tokenizer not implemented yet")
}

// Encode returns the ids of text; special tokens in text are recognised.
func (t *GGUFTokenizer) Encode(text string) []int { return nil }

// Decode returns the text of ids, without special tokens if skipSpecial.
func (t *GGUFTokenizer) Decode(ids []int, skipSpecial bool) string { return "" }

// BOS returns the beginning-of-sequence id.
func (t *GGUFTokenizer) BOS() int { return t.bos }

// EOS returns the end-of-sequence id.
func (t *GGUFTokenizer) EOS() int { return t.eos }

// PAD returns the padding id.
func (t *GGUFTokenizer) PAD() int { return t.pad }

// VocabSize returns the number of ids.
func (t *GGUFTokenizer) VocabSize() int { return len(t.tokens) }

// ChatPrompt returns the chat-template rendering of one user message, ready
// for the assistant's reply.
func (t *GGUFTokenizer) ChatPrompt(user string) string { return "" }

// WriteHF writes tokenizer.json and tokenizer_config.json into dir.
func (t *GGUFTokenizer) WriteHF(dir string) error {
	return errors.New("tokenize: WriteHF not implemented yet")
}
