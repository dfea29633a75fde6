// Command scifacteval scores SciFact-format claim verification predictions against SciFact
// gold claims with the toolkit's evaluator (eval.ScoreSciFact: the four metrics of Wadden et al.
// 2020, section 4, as the official verisci/evaluate/lib/metrics.py computes them) and prints
// them as JSON, keyed as the official script's output (abstract_label_only,
// abstract_rationalized, sentence_selection, sentence_label; each precision, recall, f1 in
// [0, 1], with the counts):
//
//	go run ./tools/scifacteval -gold datasets/scifact/verify/claims_test.jsonl -pred runs/test.oracle.scifact.jsonl
//
// The predictions need one line per gold claim (an empty evidence object for none). check.sh
// beside it runs the official script (official/, verbatim) on the same predictions and
// compares the figures.
package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
)

func main() {
	gold := flag.String("gold", "", "gold claims, SciFact layout (claims_<split>.jsonl)")
	pred := flag.String("pred", "", "predictions, SciFact format, one line per claim")
	flag.Parse()
	cli.NeedOr(*gold != "" && *pred != "" && flag.NArg() == 0, "usage: scifacteval -gold CLAIMS.jsonl -pred PREDICTIONS.jsonl")
	m, err := score(*gold, *pred)
	cli.Check("scifacteval", err)
	b, _ := json.MarshalIndent(m, "", "  ")
	fmt.Println(string(b))
}

func score(goldPath, predPath string) (eval.SciFactMetrics, error) {
	gold, err := eval.ReadSciFactGold(goldPath)
	if err != nil {
		return eval.SciFactMetrics{}, err
	}
	preds, err := eval.ReadSciFactPredictions(predPath, gold)
	if err != nil {
		return eval.SciFactMetrics{}, err
	}
	return eval.ScoreSciFact(gold, preds)
}
