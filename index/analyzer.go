package index

import (
	"strings"
	"unicode"
	"unicode/utf8"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
)

// EnglishStopWords is Lucene's English stop set (StopAnalyzer.ENGLISH_STOP_WORDS_SET, 33
// words), the one EnglishAnalyzer and StandardAnalyzer drop by default.
var EnglishStopWords = []string{
	"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
	"it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
	"these", "they", "this", "to", "was", "will", "with",
}

// maxTokenLength is StandardTokenizer's default limit (in characters): longer tokens are
// skipped, not truncated, as Lucene 4.10 does.
const maxTokenLength = 255

// Analyzer turns text into index terms. It is Lucene 4.10's analysis chain:
// StandardTokenizer (Tokenize), then optionally EnglishPossessiveFilter, LowerCaseFilter,
// StopFilter, then optionally PorterStemFilter. The zero value only tokenizes and lowercases.
type Analyzer struct {
	// Possessive strips a trailing 's (apostrophe U+0027, U+2019 or U+FF07, then s or S).
	Possessive bool
	// Stop holds the terms to drop, compared after lowercasing.
	Stop map[string]bool
	// Stem applies the Porter stemmer to every term that survives the stop filter.
	Stem bool
}

// EnglishAnalyzer returns the chain of Lucene 4.10's EnglishAnalyzer: tokenize, strip
// possessives, lowercase, drop EnglishStopWords, Porter stem.
func EnglishAnalyzer() *Analyzer {
	return &Analyzer{Possessive: true, Stop: stopSet(EnglishStopWords), Stem: true}
}

// StandardAnalyzer returns the chain of Lucene 4.10's StandardAnalyzer: tokenize, lowercase,
// drop EnglishStopWords (no possessive stripping, no stemming).
func StandardAnalyzer() *Analyzer {
	return &Analyzer{Stop: stopSet(EnglishStopWords)}
}

func stopSet(words []string) map[string]bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[w] = true
	}
	return set
}

// Analyze returns the terms of text in order; a repeated word gives a repeated term.
func (a *Analyzer) Analyze(text string) []string {
	return a.analyze(text, nil)
}

// analyze is Analyze with an optional cache of stems (word -> stem), which NewBM25 keeps for
// the length of one build: stemming is most of the cost of analysis.
func (a *Analyzer) analyze(text string, stems map[string]string) []string {
	tokens := Tokenize(text)
	terms := tokens[:0]
	for _, t := range tokens {
		if a.Possessive {
			t = stripPossessive(t)
		}
		t = strings.ToLower(t)
		if a.Stop[t] {
			continue
		}
		if a.Stem {
			if stems == nil {
				t = porterStem(t)
			} else if st, ok := stems[t]; ok {
				t = st
			} else {
				st = porterStem(t)
				stems[t] = st
				t = st
			}
		}
		terms = append(terms, t)
	}
	return terms
}

// stripPossessive is EnglishPossessiveFilter (matchVersion >= 3.6).
func stripPossessive(t string) string {
	if !strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "S") {
		return t
	}
	for _, apostrophe := range []string{"'", "\u2019", "\uFF07"} {
		if stem, ok := strings.CutSuffix(t[:len(t)-1], apostrophe); ok {
			return stem
		}
	}
	return t
}

// porterStem is Lucene's PorterStemmer. github.com/blevesearch/go-porterstemmer implements the
// same algorithm with the same departures from the 1980 paper (bli -> ble, logi -> log), except
// that it never lets a suffix be the whole word; Lucene does, which only changes the two words
// below.
func porterStem(t string) string {
	switch t {
	case "ies":
		return "i"
	case "sses":
		return "ss"
	}
	return porterstemmer.StemString(t)
}

// wordClass is a character's Word_Break property (Unicode Standard Annex #29), reduced to the
// classes Lucene's StandardTokenizer distinguishes.
type wordClass uint8

const (
	wbOther        wordClass = iota
	wbLetter                 // ALetter, Hebrew_Letter, South-East Asian scripts
	wbNumeric                // decimal digits
	wbKatakana               // Katakana: runs join, but not with letters
	wbIdeographic            // Han and Hiragana: every character is a token of its own
	wbMidLetter              // joins letter-letter:  : · ׳ ‧ ︓ ﹕ ：
	wbMidNum                 // joins digit-digit:    , ; ، ؍ ٬ ߸ ⁄ ︐ ︔ ﹐ ﹔ ， ；
	wbMidNumLet              // joins both:           . ' ‘ ’ ․ ﹒ ＇ ．
	wbExtendNumLet           // connector punctuation such as '_': joins anything wordlike
	wbExtend                 // combining marks and format characters: belong to the previous character
)

func classify(r rune) wordClass {
	switch r {
	case ':', '\u00B7', '\u0387', '\u05F4', '\u2027', '\uFE13', '\uFE55', '\uFF1A':
		return wbMidLetter
	case ',', ';', '\u037E', '\u0589', '\u060C', '\u060D', '\u066C', '\u07F8', '\u2044',
		'\uFE10', '\uFE14', '\uFE50', '\uFE54', '\uFF0C', '\uFF1B':
		return wbMidNum
	case '.', '\'', '\u2018', '\u2019', '\u2024', '\uFE52', '\uFF07', '\uFF0E':
		return wbMidNumLet
	}
	switch {
	case r < 0x80:
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
			return wbLetter
		case '0' <= r && r <= '9':
			return wbNumeric
		case r == '_':
			return wbExtendNumLet
		}
		return wbOther
	case unicode.Is(unicode.Han, r), unicode.Is(unicode.Hiragana, r):
		return wbIdeographic
	case unicode.Is(unicode.Katakana, r):
		return wbKatakana
	case unicode.IsLetter(r):
		return wbLetter
	case unicode.Is(unicode.Nd, r):
		return wbNumeric
	case unicode.Is(unicode.Pc, r):
		return wbExtendNumLet
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc, unicode.Cf):
		return wbExtend
	}
	return wbOther
}

// wordUnit is a character with the combining marks that follow it (rule WB4).
type wordUnit struct {
	class      wordClass
	start, end int // byte offsets in the text

}

// Tokenize splits text into words as Lucene 4.10's StandardTokenizer does (the word-boundary
// rules of Unicode Standard Annex #29): runs of letters and digits, joined across a single
// full stop or apostrophe between two letters or two digits ("e.g", "don't", "1.5"), a single
// ':' between letters ("zero:one") and a single ',' or ';' between digits ("50,000"). Everything else
// separates words and is dropped; '/', '-', '(' and spaces always split. Han and Hiragana
// characters are one token each. Case is kept. Tokens longer than 255 characters are skipped.
func Tokenize(text string) []string {
	units := make([]wordUnit, 0, len(text))
	for i := 0; i < len(text); {
		r, width := utf8.DecodeRuneInString(text[i:]) // invalid bytes: U+FFFD, width 1
		c := classify(r)
		switch {
		case c == wbExtend && len(units) > 0:
			units[len(units)-1].end = i + width
		case c == wbExtend:
			units = append(units, wordUnit{class: wbOther, start: i, end: i + width})
		default:
			units = append(units, wordUnit{class: c, start: i, end: i + width})
		}
		i += width
	}
	var tokens []string
	for i := 0; i < len(units); {
		c := units[i].class
		if c == wbIdeographic {
			tokens = append(tokens, text[units[i].start:units[i].end])
			i++
			continue
		}
		if c != wbLetter && c != wbNumeric && c != wbKatakana && c != wbExtendNumLet {
			i++
			continue
		}
		j := i // last unit of the token
		for j+1 < len(units) {
			a, b := units[j].class, units[j+1].class
			if joins(a, b) {
				j++
				continue
			}
			if j+2 < len(units) && units[j+2].class == a {
				if a == wbLetter && (b == wbMidLetter || b == wbMidNumLet) ||
					a == wbNumeric && (b == wbMidNum || b == wbMidNumLet) {
					j += 2
					continue
				}
			}
			break
		}
		if wordlike(units[i : j+1]) {
			tok := text[units[i].start:units[j].end]
			if len(tok) <= maxTokenLength || len([]rune(tok)) <= maxTokenLength {
				tokens = append(tokens, tok)
			}
		}
		i = j + 1
	}
	return tokens
}

// joins reports whether there is no word boundary between adjacent classes a and b (rules
// WB5, WB8-WB10, WB13, WB13a, WB13b).
func joins(a, b wordClass) bool {
	switch {
	case (a == wbLetter || a == wbNumeric) && (b == wbLetter || b == wbNumeric):
		return true
	case a == wbKatakana && b == wbKatakana:
		return true
	case b == wbExtendNumLet:
		return a == wbLetter || a == wbNumeric || a == wbKatakana || a == wbExtendNumLet
	case a == wbExtendNumLet:
		return b == wbLetter || b == wbNumeric || b == wbKatakana
	}
	return false
}

// wordlike reports whether a run holds a letter, digit or Katakana: a run of connector
// punctuation alone ("___") is not a token.
func wordlike(units []wordUnit) bool {
	for _, u := range units {
		if u.class != wbExtendNumLet {
			return true
		}
	}
	return false
}
