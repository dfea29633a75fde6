package scifactverify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// MaxCorpusBytes bounds the corpus file (SciFact's is 8.3 MB).
const MaxCorpusBytes = 256 << 20

// maxSentences bounds an abstract's sentences (SciFact's longest has 45).
const maxSentences = 1000

// Doc is one abstract: its title and sentences.
type Doc struct {
	ID    int
	Title string
	Sents []string
}

// Corpus is the abstracts by doc id and in file order.
type Corpus struct {
	ByID  map[int]*Doc
	Order []*Doc
}

// Claim is one claim to verify: its id, text and the abstracts it cites (the oracle's).
type Claim struct {
	ID    int
	Text  string
	Cited []int
}

// VerifyDir is where the claims and corpus live below data.dir.
func VerifyDir(dataDir string) string { return filepath.Join(dataDir, "verify") }

// ReadCorpus reads a SciFact corpus.jsonl ({"doc_id", "title", "abstract": [sentence, ...],
// "structured"}); a malformed line, a missing or duplicate doc_id, or an abstract of no or more
// than 1000 sentences fails with the file and line.
func ReadCorpus(path string) (*Corpus, error) {
	b, err := bounded.ReadFile(path, MaxCorpusBytes)
	if err != nil {
		return nil, err
	}
	c := &Corpus{ByID: map[int]*Doc{}}
	type corpusLine struct {
		DocID    *int     `json:"doc_id"`
		Title    string   `json:"title"`
		Abstract []string `json:"abstract"`
	}
	err = eachJSONLine(path, b, func(l *corpusLine) error {
		switch {
		case l.DocID == nil:
			return fmt.Errorf("field doc_id missing")
		case c.ByID[*l.DocID] != nil:
			return fmt.Errorf("doc_id %d repeated", *l.DocID)
		case len(l.Abstract) == 0 || len(l.Abstract) > maxSentences:
			return fmt.Errorf("doc %d has %d sentences, want 1..%d", *l.DocID, len(l.Abstract), maxSentences)
		}
		d := &Doc{ID: *l.DocID, Title: l.Title, Sents: l.Abstract}
		c.ByID[d.ID] = d
		c.Order = append(c.Order, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(c.Order) == 0 {
		return nil, fmt.Errorf("%s: no abstracts", path)
	}
	return c, nil
}

// ReadClaims reads the id, text and cited doc ids of each line of a claims file ({"id",
// "claim", "cited_doc_ids"?, ...: other fields are left to eval.ReadSciFactGold}); a missing
// id or an empty claim fails with the file and line; a cited doc missing from the corpus too.
func ReadClaims(path string, corpus *Corpus) ([]Claim, error) {
	b, err := bounded.ReadFile(path, eval.SciFactMaxFileBytes)
	if err != nil {
		return nil, err
	}
	var out []Claim
	seen := map[int]bool{}
	type claimLine struct {
		ID    *int   `json:"id"`
		Claim string `json:"claim"`
		Cited []int  `json:"cited_doc_ids"`
	}
	err = eachJSONLine(path, b, func(l *claimLine) error {
		switch {
		case l.ID == nil:
			return fmt.Errorf("field id missing")
		case seen[*l.ID]:
			return fmt.Errorf("claim id %d repeated", *l.ID)
		case len(bytes.TrimSpace([]byte(l.Claim))) == 0:
			return fmt.Errorf("field claim empty")
		}
		for _, d := range l.Cited {
			if corpus.ByID[d] == nil {
				return fmt.Errorf("cited_doc_ids: doc %d is not in the corpus", d)
			}
		}
		seen[*l.ID] = true
		out = append(out, Claim{ID: *l.ID, Text: l.Claim, Cited: l.Cited})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no claims", path)
	}
	slices.SortFunc(out, func(a, b Claim) int { return a.ID - b.ID })
	return out, nil
}

// eachJSONLine decodes each non-blank line of b, the contents of path, as a T and calls f on
// it; a line that does not decode, or an error of f, fails with path:line.
func eachJSONLine[T any](path string, b []byte, f func(l *T) error) error {
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l T
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("%s:%d: %v", path, n+1, err)
		}
		if err := f(&l); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n+1, err)
		}
	}
	return nil
}

// split is one split's claims with their gold evidence (eval.ReadSciFactGold), by claim id.
type split struct {
	claims []Claim
	gold   map[int]eval.SciFactClaim
}

func readSplit(dataDir, name string, corpus *Corpus) (*split, error) {
	path := filepath.Join(VerifyDir(dataDir), "claims_"+name+".jsonl")
	claims, err := ReadClaims(path, corpus)
	if err != nil {
		return nil, err
	}
	gold, err := eval.ReadSciFactGold(path)
	if err != nil {
		return nil, err
	}
	s := &split{claims: claims, gold: map[int]eval.SciFactClaim{}}
	for _, g := range gold {
		for d, ga := range g.Evidence {
			doc := corpus.ByID[d]
			if doc == nil {
				return nil, fmt.Errorf("%s: claim %d: evidence doc %d is not in the corpus", path, g.ID, d)
			}
			for _, set := range ga.Sets {
				for _, i := range set {
					if i >= len(doc.Sents) {
						return nil, fmt.Errorf("%s: claim %d: doc %d: rationale sentence %d of %d", path, g.ID, d, i, len(doc.Sents))
					}
				}
			}
		}
		s.gold[g.ID] = g
	}
	return s, nil
}

// bm25 indexes the corpus (title + " " + sentences, Lucene's BM25 with k1 = 1.2, b = 0.75).
func bm25(c *Corpus) *index.BM25 {
	ids := make([]string, len(c.Order))
	texts := make([]string, len(c.Order))
	for i, d := range c.Order {
		ids[i] = strconv.Itoa(d.ID)
		var b bytes.Buffer
		b.WriteString(d.Title)
		for _, s := range d.Sents {
			b.WriteByte(' ')
			b.WriteString(s)
		}
		texts[i] = b.String()
	}
	return index.NewBM25(ids, texts, index.DefaultBM25Params())
}

// retrieve returns the top k doc ids of each claim under the searcher.
func retrieve(claims []Claim, k int, search func(text string, k int) []index.Hit) (map[int][]int, error) {
	out := map[int][]int{}
	for _, c := range claims {
		for _, h := range search(c.Text, k) {
			d, err := strconv.Atoi(h.DocID)
			if err != nil {
				return nil, fmt.Errorf("retrieval: doc id %q is not an integer", h.DocID)
			}
			out[c.ID] = append(out[c.ID], d)
		}
	}
	return out, nil
}

// fromRun reads the top k doc ids of each claim from a TREC run (eval.ReadTREC); a claim with
// no ranking, or a doc missing from the corpus, is an error naming the file.
func fromRun(path string, claims []Claim, k int, corpus *Corpus) (map[int][]int, error) {
	run, err := eval.ReadTREC(path)
	if err != nil {
		return nil, err
	}
	out := map[int][]int{}
	for _, c := range claims {
		hits := run[strconv.Itoa(c.ID)]
		if len(hits) == 0 {
			return nil, fmt.Errorf("%s: claim %d has no ranking", path, c.ID)
		}
		for _, h := range hits[:min(k, len(hits))] {
			d, err := strconv.Atoi(h.DocID)
			if err != nil || corpus.ByID[d] == nil {
				return nil, fmt.Errorf("%s: claim %d: doc %q is not in the corpus", path, c.ID, h.DocID)
			}
			out[c.ID] = append(out[c.ID], d)
		}
	}
	return out, nil
}
