// Command gen writes (query, passage) pairs and the scores the Go cross-encoder gives them, for
// tools/interop/crossencoder.py to compare with sentence-transformers' CrossEncoder on the same
// exported directory:
//
//	go run ./tools/interop/gen -model EXPORT -data datasets/scifact -split test -n 64 -out pairs.jsonl
//	.venv/bin/python tools/interop/crossencoder.py EXPORT pairs.jsonl
//
// EXPORT is a cross-encoder export (`train export -run RUN/reranker-<loss>`; any directory
// export.OpenCrossEncoder reads that has max_length). The Go side reads it back (the model as
// exported, not the run's checkpoint) and scores the pairs at its max_length with one graph
// padded to that length. The pairs: for each of the first n/2 queries of the split, its first
// judged-relevant passage and one other passage of the corpus, plus three edge cases (an
// empty query, a passage far longer than max_length, characters outside the vocabulary). Each
// line of the JSONL file is
//
//	{"query": ..., "passage": ..., "ids": [token ids of the pair, no padding], "score": Go logit}
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

func main() {
	cli.Check("interop gen", run(os.Args[1:]))
}

func run(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	dir := fs.String("model", "", "cross-encoder export directory")
	ds := fs.String("data", "", "BEIR directory the pairs come from (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
	split := fs.String("split", "test", "qrels split whose queries are paired")
	n := fs.Int("n", 64, "pairs from the data set (two per query), besides the three edge cases")
	out := fs.String("out", "", "JSONL file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *ds == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("-model, -data and -out are required")
	}
	queries, passages, err := dataPairs(*ds, *split, *n)
	if err != nil {
		return err
	}
	return WritePairs(*dir, queries, passages, *out)
}

// dataPairs returns, for the first n/2 queries of split, the query with its first judged
// passage and with the passage 131 places further in the corpus, then the edge cases.
func dataPairs(dir, split string, n int) ([]string, []string, error) {
	ds, err := data.LoadJudged(dir, split)
	if err != nil {
		return nil, nil, err
	}
	qrels := ds.Qrels[split]
	var qs, ps []string
	for _, q := range qrels.QueryIDs() {
		if len(qs) >= n {
			break
		}
		text, _ := ds.Queries.Text(q)
		rel := qrels.Relevant(q)
		if len(rel) == 0 {
			continue
		}
		d, ok := ds.Corpus.Index(rel[0])
		if !ok {
			return nil, nil, fmt.Errorf("%s: judged doc %q of query %q is not in the corpus", dir, rel[0], q)
		}
		qs = append(qs, text, text)
		ps = append(ps, ds.Corpus.Passage(d, true), ds.Corpus.Passage((d+131)%ds.Corpus.Len(), true))
	}
	p0 := ds.Corpus.Passage(0, true)
	qs = append(qs, "", qs[0], "ÆØÅ ☃ 漢字 ∮ E⋅da = Q")
	ps = append(ps, p0, strings.Repeat(ps[0]+" ", 8), p0)
	return qs, ps, nil
}

// pairLine is one line of the JSONL file.
type pairLine struct {
	Query   string  `json:"query"`
	Passage string  `json:"passage"`
	IDs     []int   `json:"ids"`
	Score   float32 `json:"score"`
}

// WritePairs scores the pairs (queries[i], passages[i]) with the cross-encoder export dir at
// its max_length and writes them, with their token ids and Go scores, to the JSONL file out.
func WritePairs(dir string, queries, passages []string, out string) error {
	d, err := export.OpenCrossEncoder(dir)
	if err != nil {
		return err
	}
	if d.Body || d.MaxLength == 0 || d.Tokenizer == "" {
		return fmt.Errorf("%s: not a cross-encoder export with max_length and %s", dir, export.TokenizerFile)
	}
	tok, err := tokenize.Load(d.Tokenizer)
	if err != nil {
		return err
	}
	m, err := model.NewCrossEncoder(d.Encoder, 0)
	if err != nil {
		return err
	}
	if err := d.Init(m); err != nil {
		return err
	}
	L, B := d.MaxLength, len(queries)
	b := tok.EncodePairBatch(queries, passages, L)
	r, err := model.NewScoreRunner(m, B, L)
	if err != nil {
		return err
	}
	defer r.Close()
	scores, err := r.Score(b.IDs, b.Mask, b.Types, B)
	if err != nil {
		return err
	}
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	enc := json.NewEncoder(w)
	for i := range queries {
		var ids []int
		for j, v := range b.Mask[i*L : (i+1)*L] {
			if v != 0 {
				ids = append(ids, b.IDs[i*L+j])
			}
		}
		if err := enc.Encode(pairLine{Query: queries[i], Passage: passages[i], IDs: ids, Score: scores[i]}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(out, []byte(sb.String()))
}
