package index

import (
	"slices"
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	long := strings.Repeat("x", 256)
	tests := []struct {
		name, in string
		want     []string
	}{
		{"words", "Experimental investigation of the aerodynamics", []string{"Experimental", "investigation", "of", "the", "aerodynamics"}},
		{"sentence stop", "wing in a slipstream . an experimental", []string{"wing", "in", "a", "slipstream", "an", "experimental"}},
		{"abbreviation", "group theory, e.g. i.e. u.s.a.", []string{"group", "theory", "e.g", "i.e", "u.s.a"}},
		{"decimals", "mach 1.5 and 0.7,", []string{"mach", "1.5", "and", "0.7"}},
		{"thousands", "50,000 and 1,000.5", []string{"50,000", "and", "1,000.5"}},
		{"comma between letters splits", "x,y", []string{"x", "y"}},
		{"colon between letters joins", "zero:one 1:2", []string{"zero:one", "1", "2"}},
		{"apostrophe", "don't it's prandtl's 'quoted'", []string{"don't", "it's", "prandtl's", "quoted"}},
		{"letter digit mix", "m2 2d ab1.2", []string{"m2", "2d", "ab1.2"}},
		{"mid between letter and digit splits", "a.1 1.a", []string{"a", "1", "1", "a"}},
		{"two mids split", "a..b 1..2", []string{"a", "b", "1", "2"}},
		{"separators", "x/c (y-z)=w+v*u?", []string{"x", "c", "y", "z", "w", "v", "u"}},
		{"underscore", "foo_bar __ _x y_", []string{"foo_bar", "_x", "y_"}},
		{"combining mark", "cafe\u0301 na\u00efve", []string{"cafe\u0301", "na\u00efve"}},
		{"ideographs one each", "日本語 テスト", []string{"日", "本", "語", "テスト"}},
		{"right single quote", "earth\u2019s", []string{"earth\u2019s"}},
		{"too long skipped", "a " + long + " b", []string{"a", "b"}},
		{"empty", " .,;- ", nil},
		{"invalid UTF-8 separates", "ab\xffcd", []string{"ab", "cd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tokenize(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEnglishAnalyzer(t *testing.T) {
	a := EnglishAnalyzer()
	tests := []struct {
		in   string
		want []string
	}{
		// Cranfield query 1 and CISI query 24: BM25 on these analyses reproduces every score of
		// the Lucene 4.10 reference runs (see package eval's Cranfield test).
		{"what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft .",
			[]string{"what", "similar", "law", "must", "obei", "when", "construct", "aeroelast", "model", "heat", "high", "speed", "aircraft"}},
		{"Educational and training requirements for personnel in the information field. Possibilities for this training.",
			[]string{"educ", "train", "requir", "personnel", "inform", "field", "possibl", "train"}},
		{"THE Aircraft's WINGS, Prandtl\u2019s theory", []string{"aircraft", "wing", "prandtl", "theori"}},
		{"It's not such a thing", []string{"thing"}}, // "it's" -> "it", a stop word
		{"e.g. 1.5 1960s", []string{"e.g", "1.5", "1960"}},
	}
	for _, tt := range tests {
		if got := a.Analyze(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Analyze(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if len(EnglishStopWords) != 33 {
		t.Errorf("EnglishStopWords has %d words, Lucene's set has 33", len(EnglishStopWords))
	}
	for _, w := range EnglishStopWords {
		if got := a.Analyze(w + " " + strings.ToUpper(w)); len(got) != 0 {
			t.Errorf("stop word %q analyzed to %q", w, got)
		}
	}
}

func TestStandardAnalyzer(t *testing.T) {
	got := StandardAnalyzer().Analyze("The Aircraft's WINGS are heated")
	want := []string{"aircraft's", "wings", "heated"}
	if !slices.Equal(got, want) {
		t.Errorf("Analyze = %q, want %q", got, want)
	}
}

// TestPorterStem checks examples from Porter (1980) and the departures Lucene's PorterStemmer
// shares with Porter's reference implementation.
func TestPorterStem(t *testing.T) {
	tests := map[string]string{
		"caresses": "caress", "ponies": "poni", "ties": "ti", "caress": "caress", "cats": "cat",
		"feed": "feed", "agreed": "agre", "plastered": "plaster", "motoring": "motor", "sing": "sing",
		"conflated": "conflat", "troubled": "troubl", "sized": "size", "hopping": "hop",
		"falling": "fall", "hissing": "hiss", "filing": "file", "happy": "happi", "sky": "sky",
		"relational": "relat", "conditional": "condit", "generalization": "gener",
		"triplicate": "triplic", "adjustment": "adjust", "roll": "roll", "aerodynamics": "aerodynam",
		// Departures from the paper: bli -> ble, logi -> log.
		"possibly": "possibl", "analogies": "analog",
		// Lucene lets a suffix be the whole word; go-porterstemmer does not.
		"ies": "i", "sses": "ss",
		// Words of one or two letters are left alone.
		"is": "is", "as": "as",
	}
	for in, want := range tests {
		if got := porterStem(in); got != want {
			t.Errorf("porterStem(%q) = %q, want %q", in, got, want)
		}
	}
}
