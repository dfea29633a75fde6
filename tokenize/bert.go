package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// bertNormalizer is the Hugging Face BertNormalizer (tokenizers,
// normalizers/bert.rs): the steps run in the order clean text, CJK spacing,
// accent stripping, lowercasing.
type bertNormalizer struct {
	cleanText    bool
	chineseChars bool
	lowercase    bool
	stripAccents *bool // nil: strip when lowercasing, as Hugging Face does for null
}

// strips reports whether accents are stripped.
func (n bertNormalizer) strips() bool {
	if n.stripAccents != nil {
		return *n.stripAccents
	}
	return n.lowercase
}

// normalize returns s after the BERT normalisation steps.
func (n bertNormalizer) normalize(s string) string {
	if isASCII(s) {
		return n.normalizeASCII(s)
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if n.cleanText {
			if r == 0 || r == utf8.RuneError || isControl(r) {
				continue
			}
			if unicode.IsSpace(r) {
				r = ' '
			}
		}
		if n.chineseChars && isCJK(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	if n.strips() {
		out = stripMarks(norm.NFD.String(out))
	}
	if n.lowercase {
		out = lower(out)
	}
	return out
}

// normalizeASCII is normalize for pure ASCII input, where CJK spacing and
// accent stripping have nothing to do.
func (n bertNormalizer) normalizeASCII(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if n.cleanText {
			switch {
			case c == '\t' || c == '\n' || c == '\r':
				c = ' '
			case c < 0x20 || c == 0x7f:
				continue
			}
		}
		if n.lowercase && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isControl is Hugging Face's is_control: categories Cc, Cf, Co and Cs
// except tab, newline and carriage return, which count as whitespace.
// Unassigned code points (Cn) are kept, as the library keeps them (measured
// with tokenizers 0.23: "hello\u0378" is one [UNK]).
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// isCJK reports whether r is in a CJK Unified Ideographs block, with the
// ranges of BERT's _is_chinese_char.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

// stripMarks drops nonspacing marks (Mn) from an NFD string.
func stripMarks(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}

// lower lowercases rune by rune as Rust's char::to_lowercase does: the one
// mapping to two runes is U+0130 (İ) to "i̇".
func lower(s string) string {
	if !strings.ContainsRune(s, 'İ') {
		return strings.Map(unicode.ToLower, s)
	}
	var b strings.Builder
	for _, r := range s {
		if r == 'İ' {
			b.WriteString("i\u0307")
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// isPunct is BERT's punctuation test: ASCII punctuation (which includes
// symbols such as $, + and ^) or a Unicode P category.
func isPunct(r rune) bool {
	if r < utf8.RuneSelf {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.IsPunct(r)
}

// preTokenize is the BertPreTokenizer: it calls emit for each word of the
// normalised string s, splitting on whitespace (dropped) and around each
// punctuation rune (kept as a one-rune word).
func preTokenize(s string, emit func(word string)) {
	start := -1
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				emit(s[start:i])
				start = -1
			}
		case isPunct(r):
			if start >= 0 {
				emit(s[start:i])
				start = -1
			}
			emit(s[i : i+size])
		default:
			if start < 0 {
				start = i
			}
		}
		i += size
	}
	if start >= 0 {
		emit(s[start:])
	}
}
