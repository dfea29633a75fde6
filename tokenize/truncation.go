package tokenize

import (
	"fmt"
	"io"
	"strings"
)

// TruncCount counts what encoding texts to a fixed length cut: the texts encoded and cut, and
// their tokens before truncation and dropped (Batch's Truncated, Tokens, Dropped).
type TruncCount struct {
	texts, cut, tokens, dropped int
}

// Add counts b and returns it.
func (c *TruncCount) Add(b Batch) Batch {
	if c == nil {
		return b
	}
	c.texts += b.B
	c.cut += b.Truncated
	c.tokens += b.Tokens
	c.dropped += b.Dropped
	return b
}

// Counts returns the texts encoded, how many of them were cut, their tokens before truncation
// and the tokens dropped.
func (c TruncCount) Counts() (texts, cut, tokens, dropped int) {
	return c.texts, c.cut, c.tokens, c.dropped
}

// String reads "12 of 960 cut (3.1% of their tokens dropped)".
func (c TruncCount) String() string {
	share := 0.0
	if c.tokens > 0 {
		share = 100 * float64(c.dropped) / float64(c.tokens)
	}
	return fmt.Sprintf("%d of %d cut (%.1f%% of their tokens dropped)", c.cut, c.texts, share)
}

// TruncPart is one kind of text a task or an evaluation encodes ("queries", "passages",
// "pairs") and what truncation cut of it.
type TruncPart struct {
	Name  string
	Count *TruncCount
	L     int // the length this kind was cut to, in tokens; 0: the length the report is given
}

// TruncReporter is a task that counts its truncation, reported when its phase ends: the
// length L its texts are cut to (parts cut to another length say so) and the counts over the
// steps run.
type TruncReporter interface {
	Truncation() (L int, parts []TruncPart)
}

// ReportTruncation prints one line: what encoding to L tokens cut, by kind of text, e.g.
// "train: truncation to 48 tokens: queries 0 of 960 cut (0.0% ...); passages 312 of 2880 cut
// (21.4% ...)". When the parts were cut to different lengths (TruncPart.L), each names its own:
// "train: truncation: queries to 32 tokens 0 of 960 cut (...); passages to 256 tokens 312 of
// 2880 cut (...)". Parts that encoded nothing are left out.
func ReportTruncation(out io.Writer, what string, L int, parts ...TruncPart) {
	var shown []TruncPart
	for _, p := range parts {
		if p.Count != nil && p.Count.texts > 0 {
			if p.L == 0 {
				p.L = L
			}
			shown = append(shown, p)
		}
	}
	if len(shown) == 0 {
		return
	}
	same := true
	for _, p := range shown {
		same = same && p.L == shown[0].L
	}
	s := make([]string, len(shown))
	for i, p := range shown {
		if same {
			s[i] = p.Name + " " + p.Count.String()
		} else {
			s[i] = fmt.Sprintf("%s to %d tokens %s", p.Name, p.L, p.Count)
		}
	}
	if same {
		fmt.Fprintf(out, "%s: truncation to %d tokens: %s\n", what, shown[0].L, strings.Join(s, "; "))
	} else {
		fmt.Fprintf(out, "%s: truncation: %s\n", what, strings.Join(s, "; "))
	}
}
