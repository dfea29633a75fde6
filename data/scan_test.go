package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scanAll returns the documents ScanCorpus reports from (from, line), at most limit.
// scanned is a document ScanCorpus reported with the offset of its line.
type scanned struct {
	Document
	Offset int64
}

func scanAll(t *testing.T, path string, from int64, line, limit int) []scanned {
	t.Helper()
	var docs []scanned
	if err := ScanCorpus(path, from, line, limit, func(d Document, off int64) error { docs = append(docs, scanned{d, off}); return nil }); err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestScanCorpusMatchesLoad: on Cranfield, ScanCorpus reports LoadCorpus's documents in its
// order, and a scan resumed at any document's Offset and Line reports exactly the rest.
func TestScanCorpusMatchesLoad(t *testing.T) {
	path := "../datasets/cranfield/corpus.jsonl"
	c, err := LoadCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	docs := scanAll(t, path, 0, 1, 0)
	if len(docs) != c.Len() || len(docs) != 1400 {
		t.Fatalf("%d documents, LoadCorpus has %d (want 1400)", len(docs), c.Len())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		if want := fmt.Sprintf("{\"_id\": \"%s\"", d.ID); !strings.HasPrefix(string(raw[d.Offset:]), want) {
			t.Fatalf("document %d: offset %d starts %q, want %q", i, d.Offset, raw[d.Offset:d.Offset+20], want)
		}
		if d.ID != c.IDs[i] || d.Title != c.Titles[i] || d.Text != c.Texts[i] || d.Passage(true) != c.Passage(i, true) {
			t.Fatalf("document %d: %q differs from LoadCorpus's %q", i, d.ID, c.IDs[i])
		}
	}
	for _, k := range []int{1, 700, 1399} {
		rest := scanAll(t, path, docs[k].Offset, docs[k].Line, 3)
		if want := min(3, len(docs)-k); len(rest) != want {
			t.Fatalf("from document %d: %d documents, want %d", k, len(rest), want)
		}
		for j, d := range rest {
			if d != docs[k+j] {
				t.Fatalf("from document %d: document %d is %+v, want %+v", k, j, d.ID, docs[k+j].ID)
			}
		}
	}
}

// TestScanCorpusErrors: a malformed line gives LoadCorpus's error (file and line), blank lines
// and a byte-order mark are skipped, a callback error comes back and ErrStopScan stops cleanly.
func TestScanCorpusErrors(t *testing.T) {
	for _, name := range []string{"corpus_missing_id.jsonl", "corpus_not_object.jsonl", "corpus_null_text.jsonl", "corpus_truncated.jsonl", "corpus_unknown_field.jsonl"} {
		path := filepath.Join("testdata", name)
		_, want := LoadCorpus(path)
		got := ScanCorpus(path, 0, 1, 0, func(Document, int64) error { return nil })
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%s: ScanCorpus error %v, LoadCorpus's %v", name, got, want)
		}
	}
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	body := "\xef\xbb\xbf{\"_id\":\"a\",\"text\":\"x\"}\n\n  \n{\"_id\":\"b\",\"title\":\"t\"}\n{\"_id\":3}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var lines []int
	err := ScanCorpus(path, 0, 1, 0, func(d Document, _ int64) error { ids, lines = append(ids, d.ID), append(lines, d.Line); return nil })
	if err == nil || !strings.HasPrefix(err.Error(), path+":5: ") {
		t.Fatalf("error %v, want %s:5: ...", err, path)
	}
	if strings.Join(ids, ",") != "a,b" || lines[0] != 1 || lines[1] != 4 {
		t.Fatalf("ids %v at lines %v, want a,b at 1,4", ids, lines)
	}
	if d := scanAll(t, path, 0, 1, 1); len(d) != 1 || d[0].ID != "a" {
		t.Fatalf("limit 1: %v", d)
	}
	stop := errors.New("callback")
	if err := ScanCorpus(path, 0, 1, 0, func(Document, int64) error { return stop }); err != stop {
		t.Fatalf("callback error: got %v", err)
	}
	if err := ScanCorpus(path, 0, 1, 0, func(Document, int64) error { return ErrStopScan }); err != nil {
		t.Fatalf("ErrStopScan: got %v", err)
	}
	if err := ScanCorpus(path, 5, 1, 0, func(Document, int64) error { return nil }); err == nil {
		t.Fatal("offset 5 as line 1: no error")
	}
}
