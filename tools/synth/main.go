// Command synth writes a deterministic synthetic BEIR collection (package data/synth): N
// passages streamed to corpus.jsonl, Q queries, and qrels/{test,dev,train}.tsv with each
// query's planted relevant passages. Same flags, same bytes.
//
//	go run ./tools/synth -n 100000 -seed 42 -out /tmp/synth-100k
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ragtrain/ragtrain/data/synth"
)

func main() {
	var (
		n      = flag.Int("n", 100000, "passages")
		q      = flag.Int("queries", 1000, "queries (20% test, 10% dev, 70% train)")
		seed   = flag.Uint64("seed", 42, "random seed")
		vocab  = flag.Int("vocab", synth.DefaultVocab, "vocabulary size")
		topics = flag.Int("topics", synth.DefaultTopics, "topics")
		out    = flag.String("out", "", "output directory (required)")
	)
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "synth: -out is required")
		os.Exit(2)
	}
	t := time.Now()
	c, err := synth.New(synth.Config{Passages: *n, Queries: *q, Seed: *seed, Vocab: *vocab, Topics: *topics})
	if err == nil {
		err = c.Write(*out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "synth: %d passages, %d queries in %s (%.1fs)\n", *n, *q, *out, time.Since(t).Seconds())
}
