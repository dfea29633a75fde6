package tokenize

import (
	"strings"
	"testing"
)

// TestTruncationCountsOnAHandMadeCorpus encodes three passages of known lengths (BERT's
// uncased vocabulary: one token a word here) to L = 6, i.e. 4 tokens besides [CLS] and [SEP],
// and checks the counts and the line a phase prints.
func TestTruncationCountsOnAHandMadeCorpus(t *testing.T) {
	tok, err := Load("../testdata/tokenizers/bert-base-uncased/tokenizer.json")
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
	ReportTruncation(&out, "train", 6, TruncPart{Name: "queries", Count: &q}, TruncPart{Name: "passages", Count: &p}, TruncPart{Name: "pairs", Count: &TruncCount{}})
	want := "train: truncation to 6 tokens: queries 0 of 2 cut (0.0% of their tokens dropped); passages 2 of 3 cut (44.4% of their tokens dropped)\n"
	if out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}

	// Parts cut to their own lengths: the queries to 6 tokens, the passages to 4 (2 besides
	// [CLS] and [SEP]: 0, 4 and 8 dropped). Parts that name the report's length print as above.
	var p4 TruncCount
	p4.Add(tok.EncodeBatch(passages, 4))
	if p4.texts != 3 || p4.cut != 2 || p4.tokens != 18 || p4.dropped != 12 {
		t.Errorf("passages to 4 tokens: %+v, want 3 texts, 2 cut, 18 tokens, 12 dropped", p4)
	}
	out.Reset()
	ReportTruncation(&out, "train", 6, TruncPart{Name: "queries", Count: &q, L: 6}, TruncPart{Name: "passages", Count: &p4, L: 4})
	want = "train: truncation: queries to 6 tokens 0 of 2 cut (0.0% of their tokens dropped); passages to 4 tokens 2 of 3 cut (66.7% of their tokens dropped)\n"
	if out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}
	out.Reset()
	ReportTruncation(&out, "train", 6, TruncPart{Name: "queries", Count: &q, L: 6}, TruncPart{Name: "passages", Count: &p})
	want = "train: truncation to 6 tokens: queries 0 of 2 cut (0.0% of their tokens dropped); passages 2 of 3 cut (44.4% of their tokens dropped)\n"
	if out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}
}
