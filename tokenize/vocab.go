package tokenize

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ragtrain/ragtrain/internal/bounded"
)

// VocabOptions are the settings of a BERT WordPiece tokenizer that a vocab.txt does not hold:
// the arguments of transformers' BertTokenizer, which a tokenizer_config.json gives (see
// DefaultVocabOptions for BertTokenizer's defaults). The WordPiece parts are BERT's: continuing
// pieces prefixed "##", a word of more than 100 runes (max_input_chars_per_word) one unknown
// token, the decoder's cleanup on.
type VocabOptions struct {
	Lowercase bool // do_lower_case: lowercase the text (BertNormalizer lowercase)
	// StripAccents is strip_accents: nil strips accents exactly when Lowercase is set (BERT's
	// rule for null), otherwise its value decides.
	StripAccents *bool
	ChineseChars bool // tokenize_chinese_chars: put spaces around every CJK ideograph

	// The special tokens (unk_token, cls_token, sep_token, pad_token, mask_token); each must be
	// in the vocabulary. They are matched in the raw text before normalisation and never split,
	// as the Hugging Face tokenizer built from vocab.txt adds them.
	Unk, CLS, SEP, Pad, Mask string
	// Special lists further special tokens (additional_special_tokens and the special entries of
	// added_tokens_decoder), matched like the five above. A token in the vocabulary keeps its id;
	// any other gets the next id, in the order given.
	Special []string
}

// DefaultVocabOptions returns transformers' BertTokenizer defaults: lowercasing, accents stripped
// with it (strip_accents null), CJK ideographs split, and the special tokens [UNK] [CLS] [SEP]
// [PAD] [MASK].
func DefaultVocabOptions() VocabOptions {
	return VocabOptions{Lowercase: true, ChineseChars: true,
		Unk: unkToken, CLS: clsToken, SEP: sepToken, Pad: padToken, Mask: maskToken}
}

// LoadVocab reads a BERT vocab.txt (UTF-8, one token per line, line n holding the token of id
// n-1, as transformers' load_vocab reads it: lines end at "\n", "\r\n" or "\r", nothing else is
// trimmed) and builds the
// tokenizer FromVocab does. The tokens are the file's lines, so what it allocates is bounded by
// the file's size. Errors name the file, and the line for a bad token.
func LoadVocab(path string, o VocabOptions) (*Tokenizer, error) {
	tokens, err := readVocab(path)
	if err != nil {
		return nil, err
	}
	return fromVocabFile(path, tokens, o)
}

// readVocab returns the tokens of a vocab.txt, in id order.
func readVocab(path string) ([]string, error) {
	data, err := bounded.ReadFile(path, bounded.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	// Python reads the file with universal newlines: "\r\n" and "\r" end a line as "\n" does,
	// and a final newline ends the last line rather than starting an empty one.
	text := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
	var tokens []string
	if len(text) > 0 {
		tokens = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	for i, tok := range tokens {
		if !utf8.ValidString(tok) {
			return nil, fmt.Errorf("tokenize: %s:%d: not valid UTF-8", path, i+1)
		}
	}
	return tokens, nil
}

// fromVocabFile is FromVocab with errors naming the file (and line) the tokens came from.
func fromVocabFile(path string, tokens []string, o VocabOptions) (*Tokenizer, error) {
	t, err := FromVocab(tokens, o)
	if err != nil {
		var le *lineError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("tokenize: %s:%d: %s", path, le.line, le.msg)
		}
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return t, nil
}

// lineError is an error about the token on one line of a vocab.txt (1-based).
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// FromVocab builds the BERT WordPiece tokenizer of a vocabulary given in id order (tokens[i] has
// id i) with the settings o, as transformers' BertTokenizer (tokenizers backend) builds it from
// vocab.txt: BertNormalizer (clean_text on, o's lowercasing, accent and CJK settings),
// BertPreTokenizer, WordPiece with prefix "##" and 100 runes per word, the post-processor
// [CLS] A [SEP] / [CLS] A [SEP] B [SEP], and the special tokens of o as added special tokens.
// An empty token, a token listed twice, and a special token of o (Unk, CLS, SEP, Pad, Mask) that
// is not in the vocabulary are errors naming the token (and its line, as *lineError).
func FromVocab(tokens []string, o VocabOptions) (*Tokenizer, error) {
	if len(tokens) == 0 {
		return nil, errors.New("the vocabulary is empty")
	}
	first := make(map[string]int, len(tokens))
	for id, tok := range tokens {
		if tok == "" {
			return nil, &lineError{id + 1, fmt.Sprintf("empty token (id %d)", id)}
		}
		if prev, dup := first[tok]; dup {
			return nil, &lineError{id + 1, fmt.Sprintf("token %q is also on line %d; every token has one id", tok, prev+1)}
		}
		first[tok] = id
	}
	t := &Tokenizer{prefix: "##", maxChars: 100, unk: o.Unk, cleanup: true, tokens: slices.Clone(tokens),
		norm: bertNormalizer{cleanText: true, chineseChars: o.ChineseChars, lowercase: o.Lowercase}}
	if o.StripAccents != nil {
		v := *o.StripAccents
		t.norm.stripAccents = &v
	}
	t.buildIndex()
	// The special tokens become added tokens, each once, in id order.
	seen := map[string]bool{}
	mark := func(tok string, id int) {
		if !seen[tok] {
			seen[tok] = true
			t.added = append(t.added, addedToken{content: tok, id: id, special: true})
		}
	}
	var err error
	for _, s := range []struct {
		id    *int
		tok   string
		field string
	}{{&t.unkID, o.Unk, "unk_token"}, {&t.clsID, o.CLS, "cls_token"}, {&t.sepID, o.SEP, "sep_token"},
		{&t.padID, o.Pad, "pad_token"}, {&t.maskID, o.Mask, "mask_token"}} {
		if s.tok == "" {
			return nil, fmt.Errorf("%s: empty", s.field)
		}
		if *s.id, err = t.need(s.tok, s.field); err != nil {
			return nil, err
		}
		mark(s.tok, *s.id)
	}
	for i, tok := range o.Special {
		if tok == "" {
			return nil, fmt.Errorf("special token %d: empty", i)
		}
		id, ok := t.vocab[tok]
		if !ok {
			id = t.appendToken(tok)
		}
		mark(tok, id)
	}
	slices.SortFunc(t.added, func(a, b addedToken) int { return a.id - b.id })
	t.indexAdded()
	return t, nil
}
