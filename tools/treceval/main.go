// Command treceval scores TREC run files (qid Q0 docid rank score tag) against a BEIR qrels
// file with the toolkit's own metrics (package eval), so that rankings produced elsewhere (the
// sentence-transformers peer, tools/peer) are measured by the same code as the toolkit's runs:
//
//	go run ./tools/treceval -data datasets/scifact -split test run1.trec run2.trec
//
// It prints one table row per run, named by the file. With -linear and two runs A and B it scores,
// for each weight w listed, the fusion s = s_A + w * s_B over A's candidates (0 for a candidate
// missing from B): how loss.teacher_bm25_weight is chosen on dev from a reranker run, A its
// cross-encoder's raw scores and B BM25's,
//
//	go run ./tools/treceval -data datasets/scifact -split dev -linear 0,0.05,0.1 \
//	    runs/<teacher>/runs/dev.bm25+listwise.trec runs/<teacher>/runs/dev.bm25.trec
//
// With -rrf K it scores the Reciprocal Rank Fusion (index.RRF, k = K; 60 in the paper) of all
// the runs given, each list whole: hybrids of saved runs without re-running a recipe,
//
//	go run ./tools/treceval -data datasets/scifact -split test -rrf 60 RUN/runs/test.colbert.trec RUN/runs/test.bm25.trec
package main

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

func main() {
	dir := flag.String("data", "", "BEIR directory (corpus.jsonl, queries.jsonl, qrels/)")
	split := flag.String("split", "test", "qrels split: qrels/<split>.tsv")
	metrics := flag.String("metrics", "nDCG@10,MRR@10,Recall@100,Recall@1000,MAP,P@10", "comma-separated metrics")
	linearW := flag.String("linear", "", "comma-separated weights w: score A + w * B over A's candidates (two runs A B)")
	rrfK := flag.Int("rrf", -1, "score the Reciprocal Rank Fusion of the runs given with this k (>= 0; 60 in the paper)")
	flag.Parse()
	bad := *dir == "" || flag.NArg() == 0 || (*linearW != "" && flag.NArg() != 2) || (*rrfK >= 0 && (*linearW != "" || flag.NArg() < 2))
	cli.NeedOr(!bad, "usage: treceval -data BEIR_DIR -split SPLIT RUN.trec...\n       treceval -data BEIR_DIR -split SPLIT -linear W1,W2,... A.trec B.trec\n       treceval -data BEIR_DIR -split SPLIT -rrf K A.trec B.trec...")
	var ws []float64
	if *linearW != "" {
		for _, f := range strings.Split(*linearW, ",") {
			w, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || math.IsNaN(w) || math.IsInf(w, 0) {
				fmt.Fprintf(os.Stderr, "treceval: -linear: %q is not a finite number\n", f)
				os.Exit(2)
			}
			ws = append(ws, w)
		}
	}
	cli.Check("treceval", run(*dir, *split, strings.Split(*metrics, ","), flag.Args(), ws, *rrfK))
}

func run(dir, split string, metrics, runs []string, linearW []float64, rrfK int) error {
	ds, err := data.Load(dir, split)
	if err != nil {
		return err
	}
	qrels := ds.Qrels[split]
	var rows []eval.Row
	read := make([]eval.Run, len(runs))
	for i, p := range runs {
		if read[i], err = eval.ReadTREC(p); err != nil {
			return err
		}
	}
	if len(linearW) > 0 {
		a, b := strings.TrimSuffix(filepath.Base(runs[0]), ".trec"), strings.TrimSuffix(filepath.Base(runs[1]), ".trec")
		for _, w := range linearW {
			s, err := eval.Evaluate(linear(read[0], read[1], w), qrels, metrics)
			if err != nil {
				return err
			}
			rows = append(rows, eval.Row{System: fmt.Sprintf("%s + %g x %s", a, w, b), Scores: s})
		}
		fmt.Print(eval.FormatTable(metrics, rows))
		return nil
	}
	if rrfK >= 0 {
		names := make([]string, len(runs))
		lists := make([]map[string][]index.Hit, len(runs))
		for i, p := range runs {
			names[i], lists[i] = strings.TrimSuffix(filepath.Base(p), ".trec"), read[i]
		}
		s, err := eval.Evaluate(index.RRF(rrfK, 0, lists...), qrels, metrics)
		if err != nil {
			return err
		}
		fmt.Print(eval.FormatTable(metrics, []eval.Row{{System: fmt.Sprintf("rrf%d(%s)", rrfK, strings.Join(names, ", ")), Scores: s}}))
		return nil
	}
	for i, p := range runs {
		s, err := eval.Evaluate(read[i], qrels, metrics)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rows = append(rows, eval.Row{System: strings.TrimSuffix(filepath.Base(p), ".trec"), Scores: s})
	}
	fmt.Print(eval.FormatTable(metrics, rows))
	return nil
}

// linear returns the run over a's candidates scored s_a + w * s_b (s_b = 0 for a candidate
// missing from b), each query's hits sorted by score descending, then document id.
func linear(a, b eval.Run, w float64) eval.Run {
	out := eval.Run{}
	for q, hits := range a {
		sb := map[string]float64{}
		for _, h := range b[q] {
			sb[h.DocID] = h.Score
		}
		fused := make([]index.Hit, len(hits))
		for i, h := range hits {
			fused[i] = index.Hit{DocID: h.DocID, Score: h.Score + w*sb[h.DocID]}
		}
		slices.SortFunc(fused, func(x, y index.Hit) int {
			if x.Score != y.Score {
				return cmp.Compare(y.Score, x.Score)
			}
			return strings.Compare(x.DocID, y.DocID)
		})
		out[q] = fused
	}
	return out
}
