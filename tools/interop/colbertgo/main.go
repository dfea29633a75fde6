// Command colbertgo is the Go side of the PyLate interoperability check (tools/interop/
// colbert_pylate.py): it loads a ColBERT run (kind colbert; its latest checkpoint) or, without
// -run, builds one from a BERT directory (-init, e.g. pretrained/all-MiniLM-L6-v2) with a seeded
// projection, exports it as a PyLate model directory, and scores n claim-abstract pairs of a
// BEIR dataset's qrels (the first n of -split in query-id order) by exact MaxSim:
//
//	go run ./tools/interop/colbertgo -run RUN -data datasets/scifact -n 100 -out OUT
//	go run ./tools/interop/colbertgo -init pretrained/all-MiniLM-L6-v2 -data datasets/scifact -n 100 -out OUT
//
// It writes OUT/model (the export) and OUT/pairs.jsonl, one {"query", "passage", "score",
// "query_tokens", "passage_tokens"} object per pair (score: sum over the query's tokens of the
// largest cosine with the passage's scored tokens, float64 sum of float32 products).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
	"github.com/ragtrain/ragtrain/tools/interop/internal/jsonl"
)

func main() {
	run := flag.String("run", "", "ColBERT run (or checkpoint) directory")
	initDir := flag.String("init", "", "BERT directory to build an untrained ColBERT from (without -run)")
	dataDir := flag.String("data", "datasets/scifact", "BEIR dataset directory")
	split := flag.String("split", "train", "qrels split the pairs come from")
	n := flag.Int("n", 100, "pairs")
	out := flag.String("out", "", "output directory (must not exist)")
	flag.Parse()
	cli.Need((*run == "") != (*initDir == "") && *out != "" && *n >= 1)
	cli.Check("colbertgo", do(*run, *initDir, *dataDir, *split, *n, *out))
}

func do(run, initDir, dataDir, split string, n int, out string) error {
	var m *colbert.Model
	var tok *tokenize.Tokenizer
	var carried []checkpoints.RawTensor // BertModel's pooler, as train export carries it
	if run != "" {
		r, err := export.OpenRun(run)
		if err != nil {
			return err
		}
		if m, err = r.ColBERT(); err != nil {
			return err
		}
		if tok, err = r.Tokenizer(); err != nil {
			return err
		}
		if r.Recipe != nil {
			carried = export.CarriedTensors(r.Recipe.Model.InitFrom, m.Cfg.Encoder, os.Stderr)
		}
	} else {
		d, err := export.OpenBiEncoder(initDir)
		if err != nil {
			return err
		}
		if tok, _, err = d.LoadTokenizer(); err != nil {
			return err
		}
		if m, err = colbert.New(colbert.Config{Encoder: d.Encoder, Dim: 128, QueryLength: 32, DocumentLength: 180}, 42); err != nil {
			return err
		}
		if _, err := export.InitBiEncoder(m.Enc, initDir); err != nil {
			return err
		}
		carried = export.CarriedTensors(initDir, d.Encoder, os.Stderr)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := export.WriteColBERT(filepath.Join(out, "model"), m, tok, carried); err != nil {
		return err
	}
	ds, err := data.LoadJudged(dataDir, split)
	if err != nil {
		return err
	}
	var qs, ps []string
	qrels := ds.Qrels[split]
	for _, q := range qrels.QueryIDs() {
		for _, d := range qrels.Relevant(q) {
			if len(qs) == n {
				break
			}
			text, _ := ds.Queries.Text(q)
			i, _ := ds.Corpus.Index(d)
			qs, ps = append(qs, text), append(ps, ds.Corpus.Passage(i, true))
		}
	}
	if len(qs) < n {
		return fmt.Errorf("%s holds %d judged pairs, fewer than %d", split, len(qs), n)
	}
	enc, err := colbert.NewEncoder(m, tok, 16)
	if err != nil {
		return err
	}
	qv, err := enc.Queries(qs)
	if err != nil {
		return err
	}
	pv, err := enc.Documents(ps)
	if err != nil {
		return err
	}
	return jsonl.Write(filepath.Join(out, "pairs.jsonl"), len(qs), func(i int) any {
		return map[string]any{"query": qs[i], "passage": ps[i], "score": colbert.MaxSimScore(qv.Rows(i), pv.Rows(i), m.Cfg.Dim),
			"query_tokens": qv.Count(i), "passage_tokens": pv.Count(i)}
	})
}
