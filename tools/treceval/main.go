// Command treceval scores TREC run files (qid Q0 docid rank score tag) against a BEIR qrels
// file with the toolkit's own metrics (package eval), so that rankings produced elsewhere (the
// sentence-transformers peer, tools/peer) are measured by the same code as the toolkit's runs:
//
//	go run ./tools/treceval -data datasets/scifact -split test run1.trec run2.trec
//
// It prints one table row per run, named by the file.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
)

func main() {
	dir := flag.String("data", "", "BEIR directory (corpus.jsonl, queries.jsonl, qrels/)")
	split := flag.String("split", "test", "qrels split: qrels/<split>.tsv")
	metrics := flag.String("metrics", "nDCG@10,MRR@10,Recall@100,Recall@1000,MAP,P@10", "comma-separated metrics")
	flag.Parse()
	if *dir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: treceval -data BEIR_DIR -split SPLIT RUN.trec...")
		os.Exit(2)
	}
	if err := run(*dir, *split, strings.Split(*metrics, ","), flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "treceval:", err)
		os.Exit(1)
	}
}

func run(dir, split string, metrics, runs []string) error {
	ds, err := data.Load(dir, split)
	if err != nil {
		return err
	}
	qrels := ds.Qrels[split]
	var rows []eval.Row
	for _, p := range runs {
		r, err := eval.ReadTREC(p)
		if err != nil {
			return err
		}
		s, err := eval.Evaluate(r, qrels, metrics)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rows = append(rows, eval.Row{System: strings.TrimSuffix(filepath.Base(p), ".trec"), Scores: s})
	}
	fmt.Print(eval.FormatTable(metrics, rows))
	return nil
}
