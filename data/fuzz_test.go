package data

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// headLines returns the first n lines of a shipped file, a seed small enough to mutate quickly.
func headLines(f *testing.F, path string, n int) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	return bytes.Join(lines[:min(n, len(lines))], nil)
}

func addSeeds(f *testing.F, files ...string) {
	for _, p := range files {
		f.Add(headLines(f, p, 4))
	}
}

// fuzzFile returns a path in a directory made once per fuzzing process (a worker runs one
// input at a time), and a function writing an input there.
func fuzzFile(f *testing.F, name string) (string, func(*testing.T, []byte)) {
	path := filepath.Join(f.TempDir(), name)
	return path, func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzCorpusJSONL loads arbitrary bytes as corpus.jsonl. A corpus that loads has at least one
// document, unique non-empty ids that Index finds at their position, parallel slices, and
// Empty lists exactly the documents without title and text.
func FuzzCorpusJSONL(f *testing.F) {
	addSeeds(f, "testdata/tiny/corpus.jsonl", "../datasets/cranfield/corpus.jsonl", "../datasets/cisi/corpus.jsonl",
		"testdata/corpus_null_title.jsonl", "testdata/corpus_text_array.jsonl", "testdata/corpus_duplicate.jsonl")
	path, write := fuzzFile(f, "corpus.jsonl")
	f.Fuzz(func(t *testing.T, b []byte) {
		write(t, b)
		c, err := LoadCorpus(path)
		// The stream agrees with the loader before streaming: the same documents, or an error;
		// the same error unless a duplicate id comes before the reference's (malformed) line.
		ref, refErr := refLoadCorpus(path)
		if (err == nil) != (refErr == nil) ||
			err != nil && err.Error() != refErr.Error() && !strings.Contains(err.Error(), "duplicate _id") {
			t.Fatalf("LoadCorpus: %v, reference: %v", err, refErr)
		}
		if err == nil && (!slices.Equal(c.IDs, ref.IDs) || !slices.Equal(c.Texts, ref.Texts) || !slices.Equal(c.Titles, ref.Titles)) {
			t.Fatal("documents differ from the reference")
		}
		if err != nil {
			return
		}
		if c.Len() == 0 || len(c.Titles) != c.Len() || len(c.Texts) != c.Len() {
			t.Fatalf("%d ids, %d titles, %d texts", c.Len(), len(c.Titles), len(c.Texts))
		}
		empty := 0
		for i, id := range c.IDs {
			if j, ok := c.Index(id); id == "" || !ok || j != i {
				t.Fatalf("id %q at %d: Index gives %d, %v", id, i, j, ok)
			}
			if c.Titles[i] == "" && c.Texts[i] == "" {
				if empty >= len(c.Empty) || c.Empty[empty] != id {
					t.Fatalf("empty document %q not listed in Empty %v", id, c.Empty)
				}
				empty++
			}
		}
		if empty != len(c.Empty) {
			t.Fatalf("Empty lists %d documents, %d are empty", len(c.Empty), empty)
		}
	})
}

// FuzzQueriesJSONL loads arbitrary bytes as queries.jsonl: a set that loads has unique
// non-empty ids, each with a non-empty text.
func FuzzQueriesJSONL(f *testing.F) {
	addSeeds(f, "testdata/tiny/queries.jsonl", "../datasets/cranfield/queries.jsonl", "../datasets/cisi/queries.jsonl",
		"testdata/queries_null_text.jsonl", "testdata/queries_empty_text.jsonl")
	path, write := fuzzFile(f, "queries.jsonl")
	f.Fuzz(func(t *testing.T, b []byte) {
		write(t, b)
		q, err := LoadQueries(path)
		if err != nil {
			return
		}
		if q.Len() == 0 || len(q.Texts) != q.Len() {
			t.Fatalf("%d ids, %d texts", q.Len(), len(q.Texts))
		}
		for i, id := range q.IDs {
			if j, ok := q.Index(id); id == "" || !ok || j != i {
				t.Fatalf("id %q at %d: Index gives %d, %v", id, i, j, ok)
			}
			if text, ok := q.Text(id); !ok || text == "" || text != q.Texts[i] {
				t.Fatalf("query %q: text %q", id, text)
			}
		}
	})
}

// FuzzQrelsTSV loads arbitrary bytes as a qrels file against the tiny corpus and queries:
// every judgement that loads names a loaded query and a loaded document, and Relevant lists
// exactly the documents with a positive grade.
func FuzzQrelsTSV(f *testing.F) {
	tiny, err := Load("testdata/tiny")
	if err != nil {
		f.Fatal(err)
	}
	addSeeds(f, "testdata/tiny/qrels/train.tsv", "testdata/tiny/qrels/dev.tsv", "testdata/qrels_duplicate.tsv", "testdata/qrels_score.tsv")
	path, write := fuzzFile(f, "qrels.tsv")
	f.Fuzz(func(t *testing.T, b []byte) {
		write(t, b)
		q, err := LoadQrels(path, tiny.Corpus, tiny.Queries)
		if err != nil {
			return
		}
		for qid, docs := range q {
			if _, ok := tiny.Queries.Index(qid); !ok {
				t.Fatalf("qrels row names query %q, which is not loaded", qid)
			}
			relevant := 0
			for did, grade := range docs {
				if _, ok := tiny.Corpus.Index(did); !ok {
					t.Fatalf("qrels row names document %q, which is not loaded", did)
				}
				if grade > 0 {
					relevant++
					if !q.IsRelevant(qid, did) {
						t.Fatalf("%s %s graded %d but not relevant", qid, did, grade)
					}
				}
			}
			if len(q.Relevant(qid)) != relevant {
				t.Fatalf("query %q: Relevant lists %d, %d graded > 0", qid, len(q.Relevant(qid)), relevant)
			}
		}
	})
}
