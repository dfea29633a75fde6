package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/experiment/serve"
)

// searchArgs are the flags of `train search`.
type searchArgs struct {
	index, queries, out string
	k                   int
}

func searchFlags(a *searchArgs) *flag.FlagSet {
	fs := flag.NewFlagSet("train search", flag.ContinueOnError)
	fs.StringVar(&a.index, "index", "", "a saved index: a SPLADE run's index/splade, a ColBERT run's plaid (PLAID-style), a retriever run's corpus/shards, or a run directory (BM25 over its recipe's corpus); an index's run encodes the queries")
	fs.StringVar(&a.queries, "queries", "", "BEIR queries.jsonl: one {\"_id\", \"text\"} object per line")
	fs.IntVar(&a.k, "k", 1000, "passages per query")
	fs.StringVar(&a.out, "out", "", "TREC run file to write (atomically)")
	subUsage(fs, "Usage: train search -index DIR -queries FILE -out RUN.trec [-k N]")
	return fs
}

// runSearch is `train search`: serve.Search of the flags (a TREC run from a saved SPLADE,
// PLAID-style or dense-shard index, or BM25 over a run's corpus).
func runSearch(args []string) error {
	var a searchArgs
	fs := searchFlags(&a)
	ok := func() bool { return a.index != "" && a.queries != "" && a.out != "" && a.k >= 1 }
	if err := parseSub(fs, args, ok, "search: -index, -queries and -out are required, -k >= 1, and nothing else"); err != nil {
		return err
	}
	if err := serve.Search(a.index, a.queries, a.out, a.k, os.Stderr); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	return nil
}
