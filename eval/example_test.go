package eval_test

import (
	"fmt"

	"github.com/ragtrain/ragtrain/eval"
)

func ExampleEvaluate() {
	run := eval.Run{"q1": {
		{DocID: "d7", Score: 3.2}, {DocID: "d2", Score: 2.9}, {DocID: "d4", Score: 1.5},
	}}
	qrels := map[string]map[string]int{"q1": {"d2": 2, "d9": 1, "d7": 0}}
	metrics := []string{"nDCG@10", "MRR@10", "Recall@100", "P@10", "MAP"}
	scores, err := eval.Evaluate(run, qrels, metrics)
	if err != nil {
		fmt.Println(err)
		return
	}
	// nDCG@10 = (2/log2 3) / (2 + 1/log2 3): d2 (gain 2) at rank 2, d9 (gain 1) not retrieved.
	fmt.Print(eval.FormatTable(metrics, []eval.Row{{System: "bm25", Scores: scores}}))

	// Output:
	// system  nDCG@10  MRR@10  Recall@100    P@10     MAP
	// bm25     0.4796  0.5000      0.5000  0.1000  0.2500
}
