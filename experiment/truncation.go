package experiment

import (
	"fmt"
	"io"
	"strings"

	"github.com/ragtrain/ragtrain/tokenize"
)

// TruncCount counts what encoding texts to a fixed length cut: the texts encoded and cut, and
// their tokens before truncation and dropped (tokenize.Batch's Truncated, Tokens, Dropped).
type TruncCount struct {
	texts, cut, tokens, dropped int
}

// Add counts b and returns it.
func (c *TruncCount) Add(b tokenize.Batch) tokenize.Batch {
	if c == nil {
		return b
	}
	c.texts += b.B
	c.cut += b.Truncated
	c.tokens += b.Tokens
	c.dropped += b.Dropped
	return b
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
}

// TruncReporter is a task that counts its truncation, reported when its phase ends: the
// length L its texts are cut to and the counts over the steps run.
type TruncReporter interface {
	Truncation() (L int, parts []TruncPart)
}

// ReportTruncation prints one line: what encoding to L tokens cut, by kind of text, e.g.
// "train: truncation to 48 tokens: queries 0 of 960 cut (0.0% ...); passages 312 of 2880 cut
// (21.4% ...)". Parts that encoded nothing are left out.
func ReportTruncation(out io.Writer, what string, L int, parts ...TruncPart) {
	var s []string
	for _, p := range parts {
		if p.Count != nil && p.Count.texts > 0 {
			s = append(s, p.Name+" "+p.Count.String())
		}
	}
	if len(s) > 0 {
		fmt.Fprintf(out, "%s: truncation to %d tokens: %s\n", what, L, strings.Join(s, "; "))
	}
}
