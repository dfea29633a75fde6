package data

import (
	"fmt"
	"io"
	"path/filepath"
)

// Corpus is the document collection of corpus.jsonl, in file order. IDs,
// Titles and Texts are parallel slices indexed by document position.
type Corpus struct {
	IDs    []string
	Titles []string
	Texts  []string

	// Empty lists, in file order, the ids of documents whose title and text are
	// both empty. They are kept in the corpus (qrels may judge them) and listed
	// here so that callers can report them.
	Empty []string

	index map[string]int
}

// Len returns the number of documents.
func (c *Corpus) Len() int { return len(c.IDs) }

// Index returns the position of document id, and whether it exists.
func (c *Corpus) Index(id string) (int, bool) {
	i, ok := c.index[id]
	return i, ok
}

// Passage returns the text of document i as passages are encoded: with
// withTitle, title + " " + text (either part alone when the other is empty);
// without, the text only.
func (c *Corpus) Passage(i int, withTitle bool) string {
	return passage(c.Titles[i], c.Texts[i], withTitle)
}

// LoadCorpus reads a BEIR corpus.jsonl: one {"_id", "title", "text"} object per
// line ("title" and "text" optional, "metadata" ignored). A malformed line, a
// missing, empty or non-string "_id", a non-string title or text, an unknown
// member or a duplicate id is an error naming path and line; with several, the
// first in file order. Documents with an empty title and text are kept and
// listed in Corpus.Empty. It reads the file through a CorpusReader, which
// streams the same documents without holding them.
func LoadCorpus(path string) (*Corpus, error) {
	c := &Corpus{index: make(map[string]int)}
	err := eachDocument(path, func(d Document) error {
		c.add(d)
		c.Titles = append(c.Titles, d.Title)
		c.Texts = append(c.Texts, d.Text)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// add appends document d's id (not its title and text) to the corpus.
func (c *Corpus) add(d Document) {
	c.index[d.ID] = len(c.IDs)
	c.IDs = append(c.IDs, d.ID)
	if d.Title == "" && d.Text == "" {
		c.Empty = append(c.Empty, d.ID)
	}
}

// eachDocument hands the documents of the corpus.jsonl at path to f in file order; it returns
// the first error of the reader or of f, as it is.
func eachDocument(path string, f func(Document) error) error {
	r, err := OpenCorpus(path)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		d, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(d); err != nil {
			return err
		}
	}
}

// Queries are the queries of queries.jsonl, in file order. IDs and Texts are
// parallel slices.
type Queries struct {
	IDs   []string
	Texts []string

	index map[string]int
}

// Len returns the number of queries.
func (q *Queries) Len() int { return len(q.IDs) }

// Index returns the position of query id, and whether it exists.
func (q *Queries) Index(id string) (int, bool) {
	i, ok := q.index[id]
	return i, ok
}

// Text returns the text of query id, and whether the query exists.
func (q *Queries) Text(id string) (string, bool) {
	i, ok := q.index[id]
	if !ok {
		return "", false
	}
	return q.Texts[i], true
}

// LoadQueries reads a BEIR queries.jsonl: one {"_id", "text"} object per line
// ("metadata" ignored). Errors as for LoadCorpus; in addition a query whose
// text is empty is an error.
func LoadQueries(path string) (*Queries, error) {
	recs, err := readJSONL(path, "text")
	if err != nil {
		return nil, err
	}
	q := &Queries{
		IDs:   make([]string, 0, len(recs)),
		Texts: make([]string, 0, len(recs)),
		index: make(map[string]int, len(recs)),
	}
	lines := make([]int, 0, len(recs))
	for _, r := range recs {
		if j, dup := q.index[r.ID]; dup {
			return nil, fmt.Errorf("%s:%d: duplicate _id %q (first at line %d)", path, r.Line, r.ID, lines[j])
		}
		if r.Text == "" {
			return nil, fmt.Errorf("%s:%d: query %q: field \"text\" is empty", path, r.Line, r.ID)
		}
		q.index[r.ID] = len(q.IDs)
		q.IDs = append(q.IDs, r.ID)
		q.Texts = append(q.Texts, r.Text)
		lines = append(lines, r.Line)
	}
	if len(q.IDs) == 0 {
		return nil, fmt.Errorf("%s: no queries", path)
	}
	return q, nil
}

// Dataset is a loaded BEIR directory.
type Dataset struct {
	Dir     string
	Corpus  *Corpus
	Queries *Queries
	Qrels   map[string]Qrels // split name -> judgements of qrels/<split>.tsv
}

// Load reads dir/corpus.jsonl, dir/queries.jsonl and dir/qrels/<split>.tsv for
// each split named, checking every qrels id against the corpus and queries.
func Load(dir string, splits ...string) (*Dataset, error) {
	corpus, err := LoadCorpus(filepath.Join(dir, "corpus.jsonl"))
	if err != nil {
		return nil, err
	}
	return loadJudgements(dir, corpus, splits)
}

// loadJudgements reads the queries and the qrels of splits of dir, checked against corpus.
func loadJudgements(dir string, corpus *Corpus, splits []string) (*Dataset, error) {
	queries, err := LoadQueries(filepath.Join(dir, "queries.jsonl"))
	if err != nil {
		return nil, err
	}
	d := &Dataset{Dir: dir, Corpus: corpus, Queries: queries, Qrels: make(map[string]Qrels, len(splits))}
	for _, s := range splits {
		if _, dup := d.Qrels[s]; dup {
			continue
		}
		qr, err := LoadQrels(filepath.Join(dir, "qrels", s+".tsv"), corpus, queries)
		if err != nil {
			return nil, err
		}
		d.Qrels[s] = qr
	}
	return d, nil
}
