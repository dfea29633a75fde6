package data

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
)

func TestLoadTiny(t *testing.T) {
	d, err := Load("testdata/tiny", "train", "dev")
	if err != nil {
		t.Fatal(err)
	}
	c := d.Corpus
	if got, want := c.IDs, []string{"d1", "d2", "d3", "d4"}; !slices.Equal(got, want) {
		t.Errorf("corpus ids = %v, want %v (blank line skipped)", got, want)
	}
	if got, want := c.Empty, []string{"d4"}; !slices.Equal(got, want) {
		t.Errorf("Empty = %v, want %v", got, want)
	}
	if i, ok := c.Index("d3"); !ok || i != 2 {
		t.Errorf("Index(d3) = %d, %v; want 2, true", i, ok)
	}
	if _, ok := c.Index("d9"); ok {
		t.Error("Index(d9) found a missing id")
	}
	passages := []struct {
		i         int
		withTitle bool
		want      string
	}{
		{0, true, "Wing flutter flutter of a wing at high speed ."},
		{0, false, "flutter of a wing at high speed ."},
		{1, true, "boundary layer transition on a flat plate ."}, // empty title
		{2, true, "Heat transfer"},                               // empty text
		{2, false, ""},
		{3, true, ""},
	}
	for _, p := range passages {
		if got := c.Passage(p.i, p.withTitle); got != p.want {
			t.Errorf("Passage(%d, %v) = %q, want %q", p.i, p.withTitle, got, p.want)
		}
	}
	q := d.Queries
	if got, want := q.IDs, []string{"q1", "q2", "q3"}; !slices.Equal(got, want) {
		t.Errorf("query ids = %v, want %v", got, want)
	}
	if text, ok := q.Text("q1"); !ok || text != "wing flutter" {
		t.Errorf("Text(q1) = %q, %v; want \"wing flutter\" without the CR", text, ok)
	}
	if text, _ := q.Text("q3"); text != "unjudged query" {
		t.Errorf("Text(q3) = %q: last line without newline lost", text)
	}
	train := d.Qrels["train"]
	if got, want := train.QueryIDs(), []string{"q1", "q2"}; !slices.Equal(got, want) {
		t.Errorf("train QueryIDs = %v, want %v", got, want)
	}
	if got, want := train.Relevant("q1"), []string{"d1", "d4"}; !slices.Equal(got, want) {
		t.Errorf("Relevant(q1) = %v, want %v (d2 is judged 0)", got, want)
	}
	for _, c := range []struct {
		q, d  string
		rel   bool
		grade int
		ok    bool
	}{
		{"q1", "d1", true, 2, true},
		{"q1", "d2", false, 0, true},
		{"q1", "d3", false, 0, false},
		{"q9", "d1", false, 0, false},
	} {
		if got := train.IsRelevant(c.q, c.d); got != c.rel {
			t.Errorf("IsRelevant(%s, %s) = %v, want %v", c.q, c.d, got, c.rel)
		}
		if g, ok := train.Grade(c.q, c.d); g != c.grade || ok != c.ok {
			t.Errorf("Grade(%s, %s) = %d, %v; want %d, %v", c.q, c.d, g, ok, c.grade, c.ok)
		}
	}
	if got := d.Qrels["dev"].QueryIDs(); len(got) != 0 {
		t.Errorf("dev QueryIDs = %v, want none (only a score-0 judgement)", got)
	}
}

func TestSortIDs(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"10", "9", "100", "1"}, []string{"1", "9", "10", "100"}},
		{[]string{"10", "9", "a", "1"}, []string{"1", "10", "9", "a"}},
		{[]string{"07", "7", "-1"}, []string{"-1", "07", "7"}},
	} {
		got := slices.Clone(c.in)
		sortIDs(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("sortIDs(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestLoadErrors checks that every malformed input names file, line and field.
func TestLoadErrors(t *testing.T) {
	tiny, err := Load("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	corpus := func(p string) error { _, err := LoadCorpus(p); return err }
	queries := func(p string) error { _, err := LoadQueries(p); return err }
	qrels := func(p string) error { _, err := LoadQrels(p, tiny.Corpus, tiny.Queries); return err }
	for _, c := range []struct {
		load func(string) error
		file string
		want string // the error must be exactly "testdata/<file>" + want
	}{
		{corpus, "corpus_truncated.jsonl", ":3: invalid JSON: unexpected end of JSON input"},
		{corpus, "corpus_missing_id.jsonl", `:2: missing field "_id"`},
		{corpus, "corpus_duplicate.jsonl", `:3: duplicate _id "d1" (first at line 1)`},
		{corpus, "corpus_numeric_id.jsonl", `:1: field "_id": want a string, got a number`},
		{corpus, "corpus_unknown_field.jsonl", `:2: unknown field "body" (want "_id", [title text] or "metadata")`},
		{corpus, "corpus_text_array.jsonl", `:1: field "text": want a string, got an array`},
		{corpus, "corpus_not_object.jsonl", ":2: invalid JSON: line is a JSON array, want an object"},
		{corpus, "corpus_trailing.jsonl", ":1: invalid JSON: invalid character '{' after top-level value"},
		{corpus, "corpus_null_title.jsonl", `:2: field "title": want a string, got null`},
		{corpus, "corpus_null_text.jsonl", `:1: field "text": want a string, got null`},
		{queries, "queries_null_text.jsonl", `:1: field "text": want a string, got null`},
		{queries, "queries_empty_text.jsonl", `:2: query "q2": field "text" is empty`},
		{queries, "queries_duplicate.jsonl", `:2: duplicate _id "q1" (first at line 1)`},
		{qrels, "qrels_columns.tsv", ":3: qrels: 2 columns, want 3 (query-id, corpus-id, score separated by tabs)"},
		{qrels, "qrels_spaces.tsv", ":3: qrels: 1 columns, want 3 (query-id, corpus-id, score separated by tabs)"},
		{qrels, "qrels_score.tsv", `:2: qrels: score "1.5" is not an integer`},
		{qrels, "qrels_unknown_query.tsv", `:3: qrels: unknown query-id "q9"`},
		{qrels, "qrels_unknown_doc.tsv", `:4: qrels: unknown corpus-id "d99"`},
		{qrels, "qrels_no_header.tsv", ":1: qrels: header is \"q1\\td1\\t1\", want \"query-id\\tcorpus-id\\tscore\""},
		{qrels, "qrels_duplicate.tsv", `:3: qrels: query-id "q1" corpus-id "d1" judged twice (first at line 2)`},
		{qrels, "qrels_empty.tsv", ": qrels: empty file, want header \"query-id\\tcorpus-id\\tscore\""},
	} {
		path := filepath.Join("testdata", c.file)
		err := c.load(path)
		if err == nil {
			t.Errorf("%s: no error", c.file)
			continue
		}
		if want := path + c.want; err.Error() != want {
			t.Errorf("%s:\n got %q\nwant %q", c.file, err, want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/tiny", "test")
	if err == nil || !strings.Contains(err.Error(), filepath.Join("testdata", "tiny", "qrels", "test.tsv")) {
		t.Errorf("missing split: err = %v, want it to name qrels/test.tsv", err)
	}
}

// TestLongLine loads a document far longer than bufio.Scanner's 64 KiB limit.
func TestLongLine(t *testing.T) {
	text := strings.Repeat("supersonic ", 50000) // 550,000 bytes
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	line := `{"_id": "big", "text": "` + text + `"}` + "\n" + `{"_id": "small", "text": "x"}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 || c.Texts[0] != text || c.Texts[1] != "x" {
		t.Errorf("long line: got %d docs, first text %d bytes; want 2 docs, %d bytes", c.Len(), len(c.Texts[0]), len(text))
	}
}

// splitRule is the split of datasets/*/README.md: among the queries with a
// relevant document sorted by numeric id, position i goes to test if i%3 == 0,
// dev if i%6 == 1, else train.
func splitRule(i int) string {
	switch {
	case i%3 == 0:
		return "test"
	case i%6 == 1:
		return "dev"
	default:
		return "train"
	}
}

func TestRealCollections(t *testing.T) {
	for _, c := range []struct {
		dir                   string
		docs, queries, judged int
		train, dev, test      int
		relevantPairs         int
		empty                 []string
		firstPassagePrefix    string
	}{
		{"../datasets/cranfield", 1400, 225, 225, 112, 38, 75, 1612, []string{"471", "995"},
			"experimental investigation of the aerodynamics of a wing in a slipstream . experimental investigation"},
		{"../datasets/cisi", 1460, 112, 76, 37, 13, 26, 3114, nil,
			"18 Editions of the Dewey Decimal Classifications The present study is a history"},
	} {
		d, err := Load(c.dir, "train", "dev", "test", "all")
		if err != nil {
			t.Fatal(err)
		}
		if d.Corpus.Len() != c.docs || d.Queries.Len() != c.queries {
			t.Errorf("%s: %d docs, %d queries; want %d, %d", c.dir, d.Corpus.Len(), d.Queries.Len(), c.docs, c.queries)
		}
		if !slices.Equal(d.Corpus.Empty, c.empty) {
			t.Errorf("%s: empty documents %v, want %v", c.dir, d.Corpus.Empty, c.empty)
		}
		if p := d.Corpus.Passage(0, true); !strings.HasPrefix(p, c.firstPassagePrefix) {
			t.Errorf("%s: first passage %.80q..., want prefix %q", c.dir, p, c.firstPassagePrefix)
		}
		counts := map[string]int{}
		for _, s := range []string{"train", "dev", "test", "all"} {
			counts[s] = len(d.Qrels[s].QueryIDs())
		}
		want := map[string]int{"train": c.train, "dev": c.dev, "test": c.test, "all": c.judged}
		if !maps.Equal(counts, want) {
			t.Errorf("%s: queries with relevant documents %v, want %v", c.dir, counts, want)
		}
		pairs := 0
		for qid := range d.Qrels["all"] {
			pairs += len(d.Qrels["all"].Relevant(qid))
		}
		if pairs != c.relevantPairs {
			t.Errorf("%s: %d relevant pairs in all.tsv, want %d", c.dir, pairs, c.relevantPairs)
		}
		// Splits partition all.tsv's judged queries by the README's rule.
		for i, qid := range d.Qrels["all"].QueryIDs() {
			s := splitRule(i)
			if _, ok := d.Qrels[s][qid]; !ok {
				t.Errorf("%s: query %s (position %d) not in %s", c.dir, qid, i, s)
			}
		}
	}
}

func TestCranfieldQuery1(t *testing.T) {
	d, err := Load("../datasets/cranfield", "test")
	if err != nil {
		t.Fatal(err)
	}
	test := d.Qrels["test"]
	rel := test.Relevant("1")
	want := []string{"12", "13", "14", "15", "29", "30", "31", "37", "51", "52", "56", "57", "66", "95", "102",
		"142", "184", "185", "195", "378", "462", "497", "858", "859", "875", "876", "879", "880"}
	if !slices.Equal(rel, want) {
		t.Errorf("Relevant(1) = %v, want %v (486 is judged 0)", rel, want)
	}
	if g, _ := test.Grade("1", "29"); g != 3 {
		t.Errorf("Grade(1, 29) = %d, want 3", g)
	}
	if g, ok := test.Grade("1", "486"); g != 0 || !ok {
		t.Errorf("Grade(1, 486) = %d, %v; want 0, true", g, ok)
	}
	if ids := test.QueryIDs(); ids[0] != "1" || ids[1] != "4" || ids[len(ids)-1] != "223" {
		t.Errorf("test QueryIDs = %v..., want numeric order 1, 4, ..., 223", ids[:3])
	}
}

// TestNullFieldsBounded: issue 19's null title and text are one-line errors, cheaply.
func TestNullFieldsBounded(t *testing.T) {
	for _, c := range []struct {
		file string
		load func(string) error
	}{
		{"corpus_null_title.jsonl", func(p string) error { _, err := LoadCorpus(p); return err }},
		{"corpus_null_text.jsonl", func(p string) error { _, err := LoadCorpus(p); return err }},
		{"queries_null_text.jsonl", func(p string) error { _, err := LoadQueries(p); return err }},
	} {
		var err error
		memcheck.Bounded(t, c.file, func() { err = c.load(filepath.Join("testdata", c.file)) })
		if err == nil || !strings.Contains(err.Error(), "want a string, got null") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", c.file, err)
		}
	}
}
