package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/experiment/scifactverify"
)

// verifyArgs are the flags of `train verify`.
type verifyArgs struct {
	run, claims, out, reader, corpus string
	topK                             int
}

func verifyFlags(a *verifyArgs) *flag.FlagSet {
	fs := flag.NewFlagSet("train verify", flag.ContinueOnError)
	fs.StringVar(&a.run, "run", "", "a scifact_verify run directory (recipes/scifact-verify.toml): its trained reader is used")
	fs.StringVar(&a.claims, "claims", "", `JSONL file of claims, one {"id": int, "claim": "..."} object per line (other keys ignored; SciFact's claims files work)`)
	fs.StringVar(&a.out, "out", "", "where to write the SciFact-format predictions (JSONL, one line per claim)")
	fs.StringVar(&a.reader, "reader", "selfrag", "selfrag (the Self-RAG reader over the top-k) or plain (the plain reader over the top-1)")
	fs.StringVar(&a.corpus, "corpus", "", `a SciFact corpus.jsonl ({"doc_id", "title", "abstract": [sentence, ...]}) to retrieve from with BM25; default: the run's data.dir/verify/corpus.jsonl`)
	fs.IntVar(&a.topK, "top-k", 0, "abstracts the selfrag reader scores per claim (0: the run's scifact_verify.top_k)")
	subUsage(fs, "Usage: train verify -run RUN -claims FILE -out FILE [-reader selfrag|plain] [-top-k K] [-corpus FILE]\n\n"+
		"Writes {\"id\", \"evidence\": {\"<doc_id>\": {\"sentences\": [...], \"label\": \"SUPPORT\"|\"CONTRADICT\"}}} per claim:\n"+
		"the abstracts the reader does not abstain on (none: NOT ENOUGH INFO).")
	return fs
}

// runVerify is `train verify`: a trained scifact_verify reader over a file of claims.
func runVerify(args []string) error {
	var a verifyArgs
	fs := verifyFlags(&a)
	ok := func() bool { return a.run != "" && a.claims != "" && a.out != "" }
	if err := parseSub(fs, args, ok, "verify: -run, -claims and -out are required, and nothing else"); err != nil {
		return err
	}
	if a.topK < 0 {
		return fmt.Errorf("verify: -top-k %d: want >= 0", a.topK)
	}
	return scifactverify.Verify(a.run, a.claims, a.out, scifactverify.VerifyOptions{
		Reader: a.reader, TopK: a.topK, Corpus: a.corpus, Out: os.Stdout, Progress: os.Stderr})
}
