package tokenize

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Tokenizer is a BERT WordPiece tokenizer. Ids are dense: every id in
// [0, VocabSize()) names one token. A Tokenizer is safe for concurrent
// encoding; AddSpecialTokens must not run concurrently with anything else.
type Tokenizer struct {
	tokens   []string       // id -> token
	vocab    map[string]int // token -> id
	cont     map[string]int // continuing pieces, keyed without the prefix
	prefix   string         // continuing-subword prefix, "##"
	unk      string
	unkID    int
	maxChars int // a longer word (in runes) becomes [UNK]
	norm     bertNormalizer
	cleanup  bool // WordPiece decoder cleanup (" ." -> ".", ...)

	added   []addedToken // in id order
	byFirst [256][]int   // first byte -> indices into added, longest content first

	padID, clsID, sepID, maskID int
}

// addedToken is an entry of tokenizer.json's added_tokens. Only raw-text
// matching is supported (normalized, lstrip, rstrip and single_word false).
type addedToken struct {
	content string
	id      int
	special bool
}

// The special tokens of a BERT vocabulary, in the order Train gives them ids.
const (
	padToken  = "[PAD]"
	unkToken  = "[UNK]"
	clsToken  = "[CLS]"
	sepToken  = "[SEP]"
	maskToken = "[MASK]"
)

// PadID returns the id of [PAD], the id padding positions hold.
func (t *Tokenizer) PadID() int { return t.padID }

// CLSID returns the id of [CLS], the first token of every encoded row.
func (t *Tokenizer) CLSID() int { return t.clsID }

// SEPID returns the id of [SEP], which closes each segment.
func (t *Tokenizer) SEPID() int { return t.sepID }

// MaskID returns the id of [MASK].
func (t *Tokenizer) MaskID() int { return t.maskID }

// UnkID returns the id of the unknown token, given to words WordPiece cannot
// cover.
func (t *Tokenizer) UnkID() int { return t.unkID }

// VocabSize returns V, the number of ids, added tokens included: every id is
// in [0, V).
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the token with the given id, and false if there is none.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.tokens) {
		return "", false
	}
	return t.tokens[id], true
}

// ID returns the id of a token (a whole vocabulary entry such as "##ing" or
// "[SEP]"), and false if it is not in the vocabulary.
func (t *Tokenizer) ID(token string) (int, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// AddSpecialTokens makes each token a special token and returns their ids in
// order. A token already in the vocabulary keeps its id; a new one gets the
// next free id, VocabSize() at the time. Existing ids never change. Special
// tokens are matched in the raw text before normalisation (so "[Retrieve]"
// stays one token, whatever the casing rules) and are never split; they are
// written to and read back from tokenizer.json. The only error is an empty
// token, and then nothing is added.
func (t *Tokenizer) AddSpecialTokens(tokens []string) ([]int, error) {
	for i, tok := range tokens {
		if tok == "" {
			return nil, fmt.Errorf("tokenize: AddSpecialTokens: token %d is empty", i)
		}
	}
	ids := make([]int, len(tokens))
	for i, tok := range tokens {
		id, ok := t.vocab[tok]
		if !ok {
			id = t.appendToken(tok)
		}
		t.markSpecial(tok, id)
		ids[i] = id
	}
	t.indexAdded()
	return ids, nil
}

// appendToken gives tok the next id.
func (t *Tokenizer) appendToken(tok string) int {
	id := t.addTrained(tok)
	if rest, ok := strings.CutPrefix(tok, t.prefix); ok && t.prefix != "" {
		t.cont[rest] = id
	}
	return id
}

// markSpecial records tok (with id) as an added special token.
func (t *Tokenizer) markSpecial(tok string, id int) {
	for i := range t.added {
		if t.added[i].content == tok {
			t.added[i].special = true
			return
		}
	}
	t.added = append(t.added, addedToken{content: tok, id: id, special: true})
	sort.Slice(t.added, func(i, j int) bool { return t.added[i].id < t.added[j].id })
}

// indexAdded rebuilds the first-byte index used to find added tokens.
func (t *Tokenizer) indexAdded() {
	t.byFirst = [256][]int{}
	for i, a := range t.added {
		c := a.content[0]
		t.byFirst[c] = append(t.byFirst[c], i)
	}
	for c := range t.byFirst {
		list := t.byFirst[c]
		sort.SliceStable(list, func(i, j int) bool {
			return len(t.added[list[i]].content) > len(t.added[list[j]].content)
		})
	}
}

// buildIndex fills vocab and cont from tokens.
func (t *Tokenizer) buildIndex() {
	t.vocab = make(map[string]int, len(t.tokens))
	t.cont = make(map[string]int)
	for id, tok := range t.tokens {
		t.vocab[tok] = id
		if t.prefix == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(tok, t.prefix); ok {
			t.cont[rest] = id
		}
	}
}

// segments splits text at added tokens, leftmost-longest, calling plain for
// the text between them and special for each match.
func (t *Tokenizer) segments(text string, plain func(string), special func(id int)) {
	if len(t.added) == 0 {
		plain(text)
		return
	}
	start := 0
	for i := 0; i < len(text); {
		cands := t.byFirst[text[i]]
		matched := -1
		for _, k := range cands {
			if strings.HasPrefix(text[i:], t.added[k].content) {
				matched = k
				break
			}
		}
		if matched < 0 {
			i++
			continue
		}
		if start < i {
			plain(text[start:i])
		}
		special(t.added[matched].id)
		i += len(t.added[matched].content)
		start = i
	}
	if start < len(text) {
		plain(text[start:])
	}
}

// words calls emit for each pre-tokenized word of text, and special for each
// added token, in text order.
func (t *Tokenizer) words(text string, emit func(word string), special func(id int)) {
	t.segments(text, func(s string) { preTokenize(t.norm.normalize(s), emit) }, special)
}

// Encode returns the ids of text without [CLS] and [SEP].
func (t *Tokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text)/4+4)
	t.words(text,
		func(w string) { ids = t.appendWord(ids, w) },
		func(id int) { ids = append(ids, id) })
	return ids
}

// appendWord appends the WordPiece ids of one word: greedy longest match
// first, continuing pieces looked up with the prefix; a word longer than
// maxChars runes, or with a remainder no piece covers, is one [UNK].
func (t *Tokenizer) appendWord(dst []int, word string) []int {
	if len(word) > t.maxChars && utf8.RuneCountInString(word) > t.maxChars {
		return append(dst, t.unkID)
	}
	if id, ok := t.vocab[word]; ok {
		return append(dst, id)
	}
	mark := len(dst)
	for start := 0; start < len(word); {
		end, id := len(word), -1
		for end > start {
			var ok bool
			if start == 0 {
				id, ok = t.vocab[word[:end]]
			} else {
				id, ok = t.cont[word[start:end]]
			}
			if ok {
				break
			}
			id = -1
			_, size := utf8.DecodeLastRuneInString(word[start:end])
			end -= size
		}
		if id < 0 {
			return append(dst[:mark], t.unkID)
		}
		dst = append(dst, id)
		start = end
	}
	return dst
}

// Decode turns ids back into text the way the Hugging Face WordPiece decoder
// does: tokens joined by spaces, continuing pieces glued to the previous one
// with their prefix removed, then the cleanup " ." -> "." (and ?, !, ',',
// 's, n't ...). [PAD], [CLS] and [SEP] are skipped; [UNK], [MASK] and added
// special tokens are kept, since a generator's reflection tokens carry
// meaning. An id outside [0, V) decodes as the unknown token.
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	first := true
	for _, id := range ids {
		if id == t.padID || id == t.clsID || id == t.sepID {
			continue
		}
		tok := t.unk
		if id >= 0 && id < len(t.tokens) {
			tok = t.tokens[id]
		}
		if !first {
			if rest, ok := strings.CutPrefix(tok, t.prefix); ok && t.prefix != "" {
				tok = rest
			} else {
				tok = " " + tok
			}
		}
		if t.cleanup {
			tok = cleanupDecoded(tok)
		}
		b.WriteString(tok)
		first = false
	}
	return b.String()
}

// cleanupDecoded is tokenizers' decoders::wordpiece::cleanup, applied to
// each token in turn as the library does.
func cleanupDecoded(s string) string {
	for _, r := range [...][2]string{
		{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
		{" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"},
		{" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}
