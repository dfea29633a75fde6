package index_test

import (
	"fmt"

	"github.com/ragtrain/ragtrain/index"
)

func ExampleBM25_Search() {
	ids := []string{"d1", "d2", "d3"}
	texts := []string{
		"Flutter of a wing in a slipstream.",
		"Heat transfer in hypersonic flow.",
		"The wing's flutter speed; flutter boundaries of wings.",
	}
	x := index.NewBM25(ids, texts, index.DefaultBM25Params())
	fmt.Println(x.Analyzer().Analyze(texts[2]))
	for _, h := range x.Search("wing flutter", 10) {
		fmt.Printf("%s %.4f\n", h.DocID, h.Score)
	}
	// Output:
	// [wing flutter speed flutter boundari wing]
	// d3 1.0951
	// d1 0.9705
}

func ExampleRRF() {
	bm25 := map[string][]index.Hit{"q1": {{DocID: "a", Score: 12}, {DocID: "b", Score: 9}}}
	dense := map[string][]index.Hit{"q1": {{DocID: "b", Score: 0.8}, {DocID: "c", Score: 0.7}}}
	for _, h := range index.RRF(60, 100, bm25, dense)["q1"] {
		fmt.Printf("%s %.5f\n", h.DocID, h.Score)
	}
	// Output:
	// b 0.03252
	// a 0.01639
	// c 0.01613
}
