package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment/splade"
)

// searchArgs are the flags of `train search`.
type searchArgs struct {
	index, queries, out string
	k                   int
}

func searchFlags(a *searchArgs) *flag.FlagSet {
	fs := flag.NewFlagSet("train search", flag.ContinueOnError)
	fs.StringVar(&a.index, "index", "", "a saved index: a SPLADE run's index/splade directory (its manifest names the run whose encoder encodes the queries)")
	fs.StringVar(&a.queries, "queries", "", "BEIR queries.jsonl: one {\"_id\", \"text\"} object per line")
	fs.IntVar(&a.k, "k", 1000, "passages per query")
	fs.StringVar(&a.out, "out", "", "TREC run file to write (atomically)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: train search -index DIR -queries FILE -out RUN.trec [-k N]\n\nFlags of %s:\n", fs.Name())
		fs.PrintDefaults()
	}
	return fs
}

// runSearch is `train search`: it ranks every query of a queries file with a saved index and
// writes a TREC run (tag "splade"). Only SPLADE indexes are served so far.
func runSearch(args []string) error {
	var a searchArgs
	fs := searchFlags(&a)
	if err := parse(fs, args); err != nil {
		return err
	}
	if a.index == "" || a.queries == "" || a.out == "" || fs.NArg() > 0 || a.k < 1 {
		fs.Usage()
		return errors.New("search: -index, -queries and -out are required, -k >= 1, and nothing else")
	}
	s, err := splade.OpenSearcher(a.index)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	defer s.Close()
	qs, err := data.LoadQueries(a.queries)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	run := eval.Run{}
	for _, id := range qs.IDs {
		text, _ := qs.Text(id)
		if run[id], err = s.Search(text, a.k); err != nil {
			return fmt.Errorf("search: query %s: %w", id, err)
		}
	}
	if err := eval.WriteTREC(a.out, run, "splade"); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	fmt.Fprintf(os.Stderr, "search: %d queries over %d passages of %s -> %s\n", len(qs.IDs), s.X.Len(), a.index, a.out)
	if s.Truncated > 0 {
		fmt.Fprintf(os.Stderr, "search: truncation: %d of %d queries cut to %d tokens (the run's query_max_length)\n", s.Truncated, len(qs.IDs), s.QueryMaxLength())
	}
	return nil
}
