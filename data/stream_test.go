package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// refLoadCorpus is LoadCorpus as it was before the streaming reader (commit 5f00069): every
// record read first, duplicates checked after. The tests compare the streaming reader with it.
func refLoadCorpus(path string) (*Corpus, error) {
	recs, err := readJSONL(path, "title", "text")
	if err != nil {
		return nil, err
	}
	c := &Corpus{index: make(map[string]int, len(recs))}
	lines := make([]int, 0, len(recs))
	for _, r := range recs {
		if j, dup := c.index[r.ID]; dup {
			return nil, fmt.Errorf("%s:%d: duplicate _id %q (first at line %d)", path, r.Line, r.ID, lines[j])
		}
		c.index[r.ID] = len(c.IDs)
		c.IDs = append(c.IDs, r.ID)
		c.Titles = append(c.Titles, r.Title)
		c.Texts = append(c.Texts, r.Text)
		lines = append(lines, r.Line)
		if r.Title == "" && r.Text == "" {
			c.Empty = append(c.Empty, r.ID)
		}
	}
	if len(c.IDs) == 0 {
		return nil, fmt.Errorf("%s: no documents", path)
	}
	return c, nil
}

// streamAll reads path with a CorpusReader into a Corpus.
func streamAll(path string) (*Corpus, []int, error) {
	r, err := OpenCorpus(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	c := &Corpus{}
	var lines []int
	for {
		d, err := r.Next()
		if err == io.EOF {
			if _, err := r.Next(); err != io.EOF {
				return nil, nil, fmt.Errorf("Next after EOF: %v", err)
			}
			n, empty := r.Count()
			if n != c.Len() || empty != len(c.Empty) {
				return nil, nil, fmt.Errorf("Count() = %d, %d; read %d, %d empty", n, empty, c.Len(), len(c.Empty))
			}
			return c, lines, nil
		}
		if err != nil {
			if _, again := r.Next(); again != io.EOF {
				return nil, nil, fmt.Errorf("Next after %v: %v", err, again)
			}
			return nil, nil, err
		}
		c.IDs, c.Titles, c.Texts = append(c.IDs, d.ID), append(c.Titles, d.Title), append(c.Texts, d.Text)
		lines = append(lines, d.Line)
		if d.Title == "" && d.Text == "" {
			c.Empty = append(c.Empty, d.ID)
		}
		for _, wt := range []bool{true, false} {
			if got, want := d.Passage(wt), passage(d.Title, d.Text, wt); got != want {
				return nil, nil, fmt.Errorf("Passage(%v) = %q, want %q", wt, got, want)
			}
		}
	}
}

// TestCorpusReaderMatchesLoader streams every shipped corpus and every malformed fixture: the
// documents (ids, titles, texts, empties, in order) or the error, word for word, are those of
// the loader before streaming and of LoadCorpus.
func TestCorpusReaderMatchesLoader(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus_*.jsonl")
	files = append(files, "testdata/tiny/corpus.jsonl", "../datasets/cranfield/corpus.jsonl",
		"../datasets/cisi/corpus.jsonl", "../datasets/scifact/corpus.jsonl", "testdata/no-such-file.jsonl")
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	os.WriteFile(empty, []byte("\n\n"), 0o644)
	files = append(files, empty)
	failures := 0
	for _, path := range files {
		want, wantErr := refLoadCorpus(path)
		got, lines, err := streamAll(path)
		loaded, loadErr := LoadCorpus(path)
		if wantErr != nil {
			failures++
			if err == nil || err.Error() != wantErr.Error() || loadErr == nil || loadErr.Error() != wantErr.Error() {
				t.Errorf("%s: streaming error %v, LoadCorpus %v, want %v", path, err, loadErr, wantErr)
			}
			continue
		}
		if err != nil || loadErr != nil {
			t.Fatalf("%s: %v, %v", path, err, loadErr)
		}
		for _, c := range []*Corpus{got, loaded} {
			if !slices.Equal(c.IDs, want.IDs) || !slices.Equal(c.Titles, want.Titles) ||
				!slices.Equal(c.Texts, want.Texts) || !slices.Equal(c.Empty, want.Empty) {
				t.Fatalf("%s: documents differ from the reference", path)
			}
		}
		if len(lines) != want.Len() || lines[0] < 1 || !slices.IsSorted(lines) {
			t.Fatalf("%s: lines %v...", path, lines[:min(5, len(lines))])
		}
	}
	if failures != 12 { // the 10 corpus_*.jsonl, the missing file, the blank one
		t.Fatalf("%d failing files, want 12", failures)
	}
}

// TestCorpusFirstErrorInFileOrder: with a duplicate id on line 2 and a malformed line 4, both
// LoadCorpus and the stream report line 2 (the loader before streaming reported line 4: it
// parsed the whole file before looking for duplicates).
func TestCorpusFirstErrorInFileOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	os.WriteFile(path, []byte(`{"_id":"a"}`+"\n"+`{"_id":"a"}`+"\n\n"+`{"_id":`+"\n"), 0o644)
	want := path + `:2: duplicate _id "a" (first at line 1)`
	_, _, err := streamAll(path)
	_, loadErr := LoadCorpus(path)
	if err == nil || err.Error() != want || loadErr == nil || loadErr.Error() != want {
		t.Fatalf("stream %v, LoadCorpus %v, want %s", err, loadErr, want)
	}
	if _, refErr := refLoadCorpus(path); refErr == nil || !strings.HasSuffix(refErr.Error(), ":4: invalid JSON: unexpected end of JSON input") {
		t.Fatalf("reference: %v", refErr)
	}
}

// TestCorpusReaderConstantMemory streams 16 MB of documents of 16 KB each: the live heap stays
// within 2 MB of where it started (one line and the ids), where LoadCorpus holds all 16 MB.
func TestCorpusReaderConstantMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("abcdefg ", 2048)
	for i := range 1024 {
		fmt.Fprintf(f, `{"_id":"d%d","title":"t","text":"%s"}`+"\n", i, text)
	}
	f.Close()
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	r, err := OpenCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	base, peak, n, total := live(), uint64(0), 0, 0
	for {
		d, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		total += len(d.Text)
		if n++; n%64 == 0 {
			peak = max(peak, live())
		}
	}
	if n != 1024 || total != 1024*len(text) {
		t.Fatalf("read %d documents, %d bytes", n, total)
	}
	if peak > base+2<<20 {
		t.Fatalf("live heap grew from %d to %d bytes while streaming %d bytes", base, peak, total)
	}
	c, err := LoadCorpus(path)
	if err != nil {
		t.Fatal(err)
	}
	if held := live(); held < base+uint64(total) { // the contrast: the loader holds the texts
		t.Fatalf("LoadCorpus: live heap %d, want >= %d", held, base+uint64(total))
	}
	runtime.KeepAlive(c)
}

// LoadStreamed hands every document to visit in file order and returns LoadJudged's dataset
// with the corpus's ids only; a malformed line is LoadJudged's error, and visit's error stops it.
func TestLoadStreamedMatchesLoadJudged(t *testing.T) {
	for _, dir := range []string{"testdata/tiny", "../datasets/cranfield"} {
		splits := []string{"train"}
		if dir == "../datasets/cranfield" {
			splits = []string{"train", "dev", "test"}
		}
		want, err := LoadJudged(dir, splits...)
		if err != nil {
			t.Fatal(err)
		}
		var seen []Document
		got, err := LoadStreamed(dir, func(d Document) error { seen = append(seen, d); return nil }, splits...)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Corpus.IDs, want.Corpus.IDs) || !slices.Equal(got.Corpus.Empty, want.Corpus.Empty) || got.Corpus.Titles != nil || got.Corpus.Texts != nil {
			t.Errorf("%s: streamed corpus: %d ids, %d empty, texts %v", dir, len(got.Corpus.IDs), len(got.Corpus.Empty), got.Corpus.Texts != nil)
		}
		for i, d := range seen {
			if d.ID != want.Corpus.IDs[i] || d.Title != want.Corpus.Titles[i] || d.Text != want.Corpus.Texts[i] {
				t.Fatalf("%s: document %d visited as %+v", dir, i, d)
			}
			if j, ok := got.Corpus.Index(d.ID); !ok || j != i {
				t.Fatalf("%s: Index(%q) = %d, %v", dir, d.ID, j, ok)
			}
		}
		if len(seen) != want.Corpus.Len() || !reflect.DeepEqual(got.Qrels, want.Qrels) || !reflect.DeepEqual(got.Queries, want.Queries) {
			t.Errorf("%s: %d documents visited of %d; qrels or queries differ", dir, len(seen), want.Corpus.Len())
		}
	}
	stop := errors.New("stop")
	if _, err := LoadStreamed("testdata/tiny", func(Document) error { return stop }, "train"); err != stop {
		t.Errorf("visit's error: got %v", err)
	}
	// A malformed line: the error of LoadJudged, path:line and field.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	for _, f := range []string{"queries.jsonl", "qrels/train.tsv"} {
		b, _ := os.ReadFile(filepath.Join("testdata/tiny", f))
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	b, _ := os.ReadFile("testdata/tiny/corpus.jsonl")
	lines := strings.SplitAfter(string(b), "\n")
	lines[1] = `{"_id": "x", "text": ["a"]}` + "\n"
	os.WriteFile(filepath.Join(dir, "corpus.jsonl"), []byte(strings.Join(lines, "")), 0o644)
	_, want := LoadJudged(dir, "train")
	_, got := LoadStreamed(dir, func(Document) error { return nil }, "train")
	if want == nil || got == nil || got.Error() != want.Error() || !strings.Contains(got.Error(), "corpus.jsonl:2: ") || !strings.Contains(got.Error(), `"text"`) {
		t.Errorf("malformed line 2: LoadStreamed %v, LoadJudged %v", got, want)
	}
}
