package garden

import (
	"fmt"
	"strings"
)

// Chunkings are the datastore chunkings Write produces, each in datastore/<chunking>/:
//
//	entry     one chunk per entry, id = entry id ("g0042", "n00017")
//	sentence  one chunk per sentence, id = entry id + "-s<i>" (i from 0, in entry order)
//	window    consecutive windows of Config.WindowWords words, id = entry id + "-w<i>"; words
//	          are the space-separated tokens of the entry text, so "." counts as a word, and
//	          the last window of an entry may be shorter. Windows never span two entries.
var Chunkings = []string{"entry", "sentence", "window"}

// Chunk is one passage of a chunked datastore.
type Chunk struct {
	ID    string
	Title string // the entry's title: the gardener's name, or "news"
	Text  string
	Entry int // index in World.Entries
	// States[r] reports whether the chunk states the entry gardener's fact r: the whole entry
	// states all three, a sentence chunk its own, a window the facts whose value word it holds.
	// Always false for news.
	States [NumRelations]bool
}

// Chunks splits the datastore by chunking (one of Chunkings).
func (w *World) Chunks(chunking string) ([]Chunk, error) {
	var out []Chunk
	for ei := range w.Entries {
		e := &w.Entries[ei]
		news := e.Gardener < 0
		switch chunking {
		case "entry":
			c := Chunk{ID: e.ID, Title: e.Title, Text: e.Text(), Entry: ei}
			for _, s := range e.Sentences {
				if !news {
					c.States[s.Relation] = true
				}
			}
			out = append(out, c)
		case "sentence":
			for i, s := range e.Sentences {
				c := Chunk{ID: fmt.Sprintf("%s-s%d", e.ID, i), Title: e.Title, Text: s.Text, Entry: ei}
				if !news {
					c.States[s.Relation] = true
				}
				out = append(out, c)
			}
		case "window":
			var words []string
			valueAt := make([]Relation, 0, 16) // relation whose value word is at each position, or -1
			for _, s := range e.Sentences {
				f := strings.Fields(s.Text)
				for i := range f {
					r := Relation(-1)
					if !news && i == len(f)-2 { // every fact sentence ends "VALUE ."
						r = s.Relation
					}
					valueAt = append(valueAt, r)
				}
				words = append(words, f...)
			}
			k := w.Config.WindowWords
			for i, start := 0, 0; start < len(words); i, start = i+1, start+k {
				end := min(start+k, len(words))
				c := Chunk{ID: fmt.Sprintf("%s-w%d", e.ID, i), Title: e.Title, Text: strings.Join(words[start:end], " "), Entry: ei}
				for _, r := range valueAt[start:end] {
					if r >= 0 {
						c.States[r] = true
					}
				}
				out = append(out, c)
			}
		default:
			return nil, fmt.Errorf("garden: unknown chunking %q, want entry, sentence or window", chunking)
		}
	}
	return out, nil
}

// Relevant returns, for each question of w.Questions (same index), the ids of the chunks that
// state its fact, in chunk order: a gardener without an entry has none. Chunks are judged by
// topic, so a poisoned entry is still relevant to its question.
func (w *World) Relevant(chunks []Chunk) [][]string {
	rel := make([][]string, len(w.Questions))
	for _, c := range chunks {
		g := w.Entries[c.Entry].Gardener
		if g < 0 {
			continue
		}
		for _, r := range Relations {
			if c.States[r] {
				q := g*NumRelations + int(r) // questions are by gardener id, then relation
				rel[q] = append(rel[q], c.ID)
			}
		}
	}
	return rel
}
