package garden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// Write writes the world under dir (created if needed), every file atomically:
//
//	world.json                         config, value lists, moves and poisons
//	pretrain.txt                       the pretraining corpus, one document per line
//	gardeners.jsonl                    one gardener per line, by id
//	questions.jsonl                    every question with its three phrasings and answer
//	counts.tsv                         gardener, then COUNTS of lives_in, grows, keeps
//	datastore/<chunking>/corpus.jsonl  BEIR corpus: {"_id", "title", "text"}
//	datastore/<chunking>/queries.jsonl BEIR queries: {"_id", "text" (trained form), "metadata"}
//	datastore/<chunking>/qrels/{train,test}.tsv
//	                                   "query-id<TAB>corpus-id<TAB>score", score 1 for every
//	                                   chunk stating the asked fact; questions of gardeners
//	                                   without an entry have no rows
//
// for each chunking of Chunkings. The datastore directories load with data.Load(dir, "train",
// "test"). The same world always writes the same bytes.
func (w *World) Write(dir string) error {
	files := []struct {
		path string
		fill func(io.Writer) error
	}{
		{"world.json", w.writeWorld},
		{"pretrain.txt", w.writePretrain},
		{"gardeners.jsonl", w.writeGardeners},
		{"questions.jsonl", w.writeQuestions},
		{"counts.tsv", w.writeCounts},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := atomicfile.Write(filepath.Join(dir, f.path), f.fill); err != nil {
			return err
		}
	}
	for _, ch := range Chunkings {
		if err := w.writeDatastore(filepath.Join(dir, "datastore", ch), ch); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) writeDatastore(dir, chunking string) error {
	chunks, err := w.Chunks(chunking)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "qrels"), 0o755); err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(dir, "corpus.jsonl"), func(out io.Writer) error {
		for _, c := range chunks {
			if err := jsonLine(out, corpusRecord{ID: c.ID, Title: c.Title, Text: c.Text}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(dir, "queries.jsonl"), func(out io.Writer) error {
		for i := range w.Questions {
			q := &w.Questions[i]
			rec := queryRecord{ID: q.ID, Text: q.Trained, Metadata: queryMeta{
				Gardener: w.Gardeners[q.Gardener].Key, Relation: q.Relation.String(),
				Answer: q.Answer, Bucket: q.Bucket, Split: q.Split,
			}}
			if err := jsonLine(out, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rel := w.Relevant(chunks)
	for _, split := range []string{"train", "test"} {
		err := atomicfile.Write(filepath.Join(dir, "qrels", split+".tsv"), func(out io.Writer) error {
			if _, err := io.WriteString(out, "query-id\tcorpus-id\tscore\n"); err != nil {
				return err
			}
			for i := range w.Questions {
				if w.Questions[i].Split != split {
					continue
				}
				for _, id := range rel[i] {
					if _, err := fmt.Fprintf(out, "%s\t%s\t1\n", w.Questions[i].ID, id); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

type corpusRecord struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

type queryRecord struct {
	ID       string    `json:"_id"`
	Text     string    `json:"text"`
	Metadata queryMeta `json:"metadata"`
}

type queryMeta struct {
	Gardener string `json:"gardener"`
	Relation string `json:"relation"`
	Answer   string `json:"answer"`
	Bucket   string `json:"bucket"`
	Split    string `json:"split"`
}

// GardenerRecord is one line of gardeners.jsonl.
type GardenerRecord struct {
	ID          string `json:"id"`
	Index       int    `json:"index"`
	FirstName   string `json:"first_name"`
	Surname     string `json:"surname"`
	Name        string `json:"name"`
	Town        string `json:"town"`
	Plant       string `json:"plant"`
	Animal      string `json:"animal"`
	Rank        int    `json:"rank"`
	Biographies int    `json:"biographies"`
	Covered     bool   `json:"covered"`
	Split       string `json:"split"`
}

// QuestionRecord is one line of questions.jsonl.
type QuestionRecord struct {
	ID       string `json:"id"`
	Gardener string `json:"gardener"`
	Relation string `json:"relation"`
	Cloze    string `json:"cloze"`
	Question string `json:"question"` // the trained form
	Unseen   string `json:"unseen"`
	Answer   string `json:"answer"`
	Count    int    `json:"count"`
	Bucket   string `json:"bucket"`
	Split    string `json:"split"`
	HasEntry bool   `json:"has_entry"`
	Previous string `json:"previous,omitempty"`
	Poisoned string `json:"poisoned,omitempty"`
}

type worldRecord struct {
	Config     Config         `json:"config"`
	FirstNames []string       `json:"first_names"`
	Towns      []string       `json:"towns"`
	Plants     []string       `json:"plants"`
	Animals    []string       `json:"animals"`
	Moves      []moveRecord   `json:"moves"`
	Poisons    []poisonRecord `json:"poisons"`
}

type moveRecord struct {
	Gardener string `json:"gardener"`
	From     string `json:"from"`
	To       string `json:"to"`
}

type poisonRecord struct {
	Gardener string `json:"gardener"`
	Relation string `json:"relation"`
	True     string `json:"true"`
	Wrong    string `json:"wrong"`
}

func (w *World) writeWorld(out io.Writer) error {
	rec := worldRecord{
		Config: w.Config, FirstNames: w.FirstNames,
		Towns: w.Values[LivesIn], Plants: w.Values[Grows], Animals: w.Values[Keeps],
		Moves: []moveRecord{}, Poisons: []poisonRecord{},
	}
	for _, m := range w.Moves {
		rec.Moves = append(rec.Moves, moveRecord{w.Gardeners[m.Gardener].Key, m.From, m.To})
	}
	for _, p := range w.Poisons {
		rec.Poisons = append(rec.Poisons, poisonRecord{w.Gardeners[p.Gardener].Key, p.Relation.String(), p.True, p.Wrong})
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

func (w *World) writePretrain(out io.Writer) error {
	for _, d := range w.Pretrain {
		if strings.ContainsAny(d.Text, "\r\n") {
			return fmt.Errorf("pretraining document %q spans lines", d.Text)
		}
		if _, err := io.WriteString(out, d.Text+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) writeGardeners(out io.Writer) error {
	return jsonLines(out, w.Gardeners, func(g *Gardener) any {
		return GardenerRecord{
			ID: g.Key, Index: g.ID, FirstName: g.FirstName, Surname: g.Surname, Name: g.Name(),
			Town: g.Facts[LivesIn], Plant: g.Facts[Grows], Animal: g.Facts[Keeps],
			Rank: g.Rank, Biographies: g.Biographies, Covered: g.Covered, Split: g.Split(),
		}
	})
}

func (w *World) writeQuestions(out io.Writer) error {
	return jsonLines(out, w.Questions, func(q *Question) any {
		return QuestionRecord{
			ID: q.ID, Gardener: w.Gardeners[q.Gardener].Key, Relation: q.Relation.String(),
			Cloze: q.Cloze, Question: q.Trained, Unseen: q.Unseen, Answer: q.Answer,
			Count: q.Count, Bucket: q.Bucket, Split: q.Split, HasEntry: q.HasEntry,
			Previous: q.Previous, Poisoned: q.Poisoned,
		}
	})
}

// jsonLines writes record(&items[i]) for every item, in order, one jsonLine each.
func jsonLines[T any](out io.Writer, items []T, record func(*T) any) error {
	for i := range items {
		if err := jsonLine(out, record(&items[i])); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) writeCounts(out io.Writer) error {
	if _, err := io.WriteString(out, "gardener\tlives_in\tgrows\tkeeps\n"); err != nil {
		return err
	}
	for i, c := range w.Counts {
		if _, err := fmt.Fprintf(out, "%s\t%d\t%d\t%d\n", w.Gardeners[i].Key, c[LivesIn], c[Grows], c[Keeps]); err != nil {
			return err
		}
	}
	return nil
}

// jsonLine writes v as one line of JSON (HTML characters unescaped).
func jsonLine(out io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := out.Write(b.Bytes())
	return err
}
