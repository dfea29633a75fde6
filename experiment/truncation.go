package experiment

import (
	"fmt"
	"io"
	"strings"

	"github.com/ragtrain/ragtrain/tokenize"
)

// truncCount counts what encoding texts to a fixed length cut: the texts encoded and cut, and
// their tokens before truncation and dropped (tokenize.Batch's Truncated, Tokens, Dropped).
type truncCount struct {
	texts, cut, tokens, dropped int
}

// add counts b and returns it.
func (c *truncCount) add(b tokenize.Batch) tokenize.Batch {
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
func (c truncCount) String() string {
	share := 0.0
	if c.tokens > 0 {
		share = 100 * float64(c.dropped) / float64(c.tokens)
	}
	return fmt.Sprintf("%d of %d cut (%.1f%% of their tokens dropped)", c.cut, c.texts, share)
}

// truncPart is one kind of text a task or an evaluation encodes ("queries", "passages",
// "pairs") and what truncation cut of it.
type truncPart struct {
	name string
	c    *truncCount
}

// truncReporter is a task that counts its truncation, reported when its phase ends: the
// length L its texts are cut to and the counts over the steps run.
type truncReporter interface {
	truncation() (L int, parts []truncPart)
}

// reportTruncation prints one line: what encoding to L tokens cut, by kind of text, e.g.
// "train: truncation to 48 tokens: queries 0 of 960 cut (0.0% ...); passages 312 of 2880 cut
// (21.4% ...)". Parts that encoded nothing are left out.
func reportTruncation(out io.Writer, what string, L int, parts ...truncPart) {
	var s []string
	for _, p := range parts {
		if p.c != nil && p.c.texts > 0 {
			s = append(s, p.name+" "+p.c.String())
		}
	}
	if len(s) > 0 {
		fmt.Fprintf(out, "%s: truncation to %d tokens: %s\n", what, L, strings.Join(s, "; "))
	}
}
