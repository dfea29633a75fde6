package tokenize

import (
	"unicode"
	"unicode/utf8"
)

// Byte-level BPE (GPT-2: Radford et al. 2019, "Language Models are
// Unsupervised Multitask Learners", §2.2; BPE: Sennrich et al. 2016, "Neural
// Machine Translation of Rare Words with Subword Units", §3.2): text is split
// into pre-tokens by GPT-2's pattern, each pre-token's UTF-8 bytes are
// spelled in a 256-character alphabet (bytesToUnicode), and the BPE merges
// are applied to that spelling, lowest rank first.

// bytesToUnicode is GPT-2's byte alphabet (openai/gpt-2 encoder.py
// bytes_to_unicode): the printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' stand
// for themselves, the other 68 bytes map to U+0100.. in byte order (so ' '
// is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
func bytesToUnicode() (enc [256]rune, dec map[rune]byte) {
	dec = make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			enc[b] = rune(b)
		} else {
			enc[b] = 256 + n
			n++
		}
		dec[enc[b]] = byte(b)
	}
	return enc, dec
}

var byteEnc, byteDec = bytesToUnicode()

// gpt2Split cuts text into GPT-2 pre-tokens, as the regular expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// of Hugging Face tokenizers' ByteLevel pre-tokenizer (use_regex true) and
// openai/gpt-2 encoder.py matches it, written out by hand because Go's
// regexp has no look-ahead. \s is Unicode White_Space (unicode.IsSpace),
// \p{L} unicode.IsLetter, \p{N} unicode.IsNumber. Every byte of text is in
// exactly one piece; invalid UTF-8 bytes count as non-letter symbols.
func gpt2Split(text string, emit func(piece string)) {
	i := 0
	for i < len(text) {
		j := gpt2Match(text, i)
		emit(text[i:j])
		i = j
	}
}

type runeClass int

const (
	classOther runeClass = iota
	classLetter
	classNumber
	classSpace
)

func classAt(s string, i int) (runeClass, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && n <= 1:
		return classOther, 1
	case unicode.IsLetter(r):
		return classLetter, n
	case unicode.IsNumber(r):
		return classNumber, n
	case unicode.IsSpace(r):
		return classSpace, n
	}
	return classOther, n
}

// run returns the end of the run of class c starting at i.
func run(s string, i int, c runeClass) int {
	for i < len(s) {
		k, n := classAt(s, i)
		if k != c {
			break
		}
		i += n
	}
	return i
}

// gpt2Match returns the end of the pre-token starting at i (< len(s)).
func gpt2Match(s string, i int) int {
	if s[i] == '\'' {
		for _, c := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if len(s)-i-1 >= len(c) && s[i+1:i+1+len(c)] == c {
				return i + 1 + len(c)
			}
		}
	}
	start := i
	if s[i] == ' ' && i+1 < len(s) {
		if c, _ := classAt(s, i+1); c != classSpace {
			start = i + 1 // " ?" takes the space before a letter, number or symbol
		}
	}
	c, _ := classAt(s, start)
	if c != classSpace {
		return run(s, start, c)
	}
	// \s+(?!\S): the whitespace run, less its last character when a
	// non-space follows (the backtracked match), unless that leaves nothing,
	// in which case \s+ takes the whole run.
	end := run(s, i, classSpace)
	if end == len(s) {
		return end
	}
	last := end - 1
	for last > i && !utf8.RuneStart(s[last]) {
		last--
	}
	if last > i {
		return last
	}
	return end
}

// bpe is a byte-level BPE model: merges of adjacent symbol ids by rank.
type bpe struct {
	merges map[uint64]merge // (left id, right id) -> merge
	char   [256]int         // byte -> id of its alphabet character, -1 when the vocabulary lacks it
}

type merge struct{ rank, id int }

func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// encode appends the ids of one pre-token. A byte whose alphabet character
// is not in the vocabulary is dropped (Hugging Face BPE with no unk token
// does the same), and its neighbours may then merge.
func (m *bpe) encode(piece string, out []int) []int {
	syms := make([]int, 0, len(piece))
	for k := 0; k < len(piece); k++ {
		if id := m.char[piece[k]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for k := 0; k+1 < len(syms); k++ {
			if mg, ok := m.merges[pairKey(syms[k], syms[k+1])]; ok && (at < 0 || mg.rank < best.rank) {
				best, at = mg, k
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return append(out, syms...)
}

// appendLossy appends b to out as valid UTF-8, each maximal invalid
// subsequence replaced by one U+FFFD, as Rust's String::from_utf8_lossy
// (and so Hugging Face tokenizers' ByteLevel decoder) does.
func appendLossy(out []byte, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			out = append(out, b[:n]...)
			b = b[n:]
			continue
		}
		out = append(out, "\uFFFD"...)
		b = b[invalidPrefix(b):]
	}
	return out
}

// invalidPrefix is the length of the maximal prefix of b that starts a
// well-formed UTF-8 sequence but does not complete it (at least 1), per
// Unicode §3.9 "U+FFFD Substitution of Maximal Subparts".
func invalidPrefix(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c >= 0xE0 && c <= 0xEF:
		need = 2
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
	case c >= 0xF0 && c <= 0xF4:
		need = 3
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
	default:
		return 1
	}
	k := 1
	for ; k <= need && k < len(b); k++ {
		if b[k] < lo || b[k] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return k
}
