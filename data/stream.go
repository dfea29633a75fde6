package data

import (
	"fmt"
	"io"
	"path/filepath"
)

// Document is one line of corpus.jsonl.
type Document struct {
	ID    string
	Title string
	Text  string
	Line  int // 1-based line in the file
}

// Passage returns the text of d as passages are encoded, as Corpus.Passage does: with
// withTitle, title + " " + text (either part alone when the other is empty); without, the
// text only.
func (d Document) Passage(withTitle bool) string { return passage(d.Title, d.Text, withTitle) }

func passage(title, text string, withTitle bool) string {
	switch {
	case !withTitle || title == "":
		return text
	case text == "":
		return title
	default:
		return title + " " + text
	}
}

// CorpusReader streams a BEIR corpus.jsonl one document at a time: it holds one line of text
// at a time, plus every id read so far with its line (to report a duplicate as LoadCorpus
// does). It accepts and refuses exactly what LoadCorpus does, with the same errors, word for
// word ("path:line: ..."), at the same line; LoadCorpus's document i is the i-th Next.
//
//	r, err := data.OpenCorpus(path)
//	...
//	defer r.Close()
//	for {
//		d, err := r.Next()
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			return err
//		}
//		... d.ID, d.Passage(true) ...
//	}
type CorpusReader struct {
	path  string
	j     *jsonlReader
	lines map[string]int // id -> line
	n     int
	empty int
}

// OpenCorpus opens path for streaming.
func OpenCorpus(path string) (*CorpusReader, error) {
	j, err := openJSONL(path, "title", "text")
	if err != nil {
		return nil, err
	}
	return &CorpusReader{path: path, j: j, lines: make(map[string]int)}, nil
}

// Next returns the next document, io.EOF after the last one, or the error that LoadCorpus
// would return for the file (a malformed line, a duplicate id, or no documents at all); after
// an error, Next returns io.EOF.
func (r *CorpusReader) Next() (Document, error) {
	rec, err := r.j.next()
	if err == io.EOF {
		if r.n == 0 && r.lines != nil {
			r.lines = nil
			return Document{}, fmt.Errorf("%s: no documents", r.path)
		}
		return Document{}, io.EOF
	}
	if err != nil {
		r.lines = nil
		return Document{}, err
	}
	if first, dup := r.lines[rec.ID]; dup {
		r.j.done, r.lines = true, nil
		return Document{}, fmt.Errorf("%s:%d: duplicate _id %q (first at line %d)", r.path, rec.Line, rec.ID, first)
	}
	r.lines[rec.ID] = rec.Line
	r.n++
	if rec.Title == "" && rec.Text == "" {
		r.empty++
	}
	return Document(rec), nil
}

// Count returns the number of documents returned so far, and how many of them have an empty
// title and text (LoadCorpus lists those in Corpus.Empty).
func (r *CorpusReader) Count() (docs, empty int) { return r.n, r.empty }

// Close closes the file.
func (r *CorpusReader) Close() error { return r.j.close() }

// LoadStreamed is LoadJudged for a corpus too large to hold in memory: dir/corpus.jsonl is
// streamed once, each document handed to visit in file order, and the Dataset's Corpus keeps
// its ids only (IDs, Index, Len and Empty as LoadCorpus gives them; Titles and Texts are nil,
// so Passage is not available). The queries and qrels are LoadJudged's, with the same checks
// and errors; a malformed corpus line is CorpusReader's error ("path:line: ..."), and an
// error of visit is returned as it is.
func LoadStreamed(dir string, visit func(Document) error, splits ...string) (*Dataset, error) {
	c := &Corpus{index: make(map[string]int)}
	err := eachDocument(filepath.Join(dir, "corpus.jsonl"), func(doc Document) error {
		c.add(doc)
		return visit(doc)
	})
	if err != nil {
		return nil, err
	}
	d, err := loadJudgements(dir, c, splits)
	if err != nil {
		return nil, err
	}
	if err := d.CheckJudged(); err != nil {
		return nil, err
	}
	return d, nil
}
