package experiment

import (
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/tokenize"
)

// TestTruncationCountsOnAHandMadeCorpus encodes three passages of known lengths (BERT's
// uncased vocabulary: one token a word here) to L = 6, i.e. 4 tokens besides [CLS] and [SEP],
// and checks the counts and the line a phase prints.
func TestTruncationCountsOnAHandMadeCorpus(t *testing.T) {
	tok, err := tokenize.Load("../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	passages := []string{
		"the wing",                        // 2 tokens: fits
		"the wing of the aircraft stalls", // 6 tokens: 2 dropped
		"a b c d e f g h i j",             // 10 tokens: 6 dropped
	}
	queries := []string{"lift", "drag at high speed"} // 1 and 4 tokens: both fit
	var p, q TruncCount
	p.Add(tok.EncodeBatch(passages, 6))
	q.Add(tok.EncodeBatch(queries, 6))
	if p.texts != 3 || p.cut != 2 || p.tokens != 18 || p.dropped != 8 {
		t.Errorf("passages: %+v, want 3 texts, 2 cut, 18 tokens, 8 dropped", p)
	}
	if q.texts != 2 || q.cut != 0 || q.tokens != 5 || q.dropped != 0 {
		t.Errorf("queries: %+v, want 2 texts, 0 cut, 5 tokens, 0 dropped", q)
	}
	var out strings.Builder
	ReportTruncation(&out, "train", 6, TruncPart{"queries", &q}, TruncPart{"passages", &p}, TruncPart{"pairs", &TruncCount{}})
	want := "train: truncation to 6 tokens: queries 0 of 2 cut (0.0% of their tokens dropped); passages 2 of 3 cut (44.4% of their tokens dropped)\n"
	if out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}
}
