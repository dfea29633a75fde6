package sampler_test

import (
	"fmt"

	"github.com/ragtrain/ragtrain/sampler"
)

func Example() {
	qrels := map[string]map[string]int{
		"q1": {"d1": 2, "d2": 0},
		"q2": {"d3": 1, "d1": 1}, // d1 is relevant to both queries
		"q3": {"d4": 1},
	}
	bm25 := map[string][]string{ // first-stage rankings, best first
		"q1": {"d1", "d2", "d3", "d5"},
		"q2": {"d3", "d1", "d5", "d2"},
		"q3": {"d4", "d5", "d6", "d1"},
	}
	examples, st, err := sampler.Mine(qrels, bm25, sampler.MineOptions{Negatives: 1, Lo: 1, Hi: 3, Strategy: sampler.Top})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(examples, st.ExcludedRelevant)

	c := sampler.Collection{
		Queries:  map[string]string{"q1": "wing lift", "q2": "slipstream", "q3": "heat transfer"},
		DocIDs:   []string{"d1", "d2", "d3", "d4", "d5", "d6"},
		DocTexts: []string{"t1", "t2", "t3", "t4", "t5", "t6"},
		Qrels:    qrels,
	}
	s, err := sampler.New(c, examples, sampler.Options{BatchSize: 2, HardNegatives: 1, Seed: 42})
	if err != nil {
		fmt.Println(err)
		return
	}
	for step := range 2 {
		b, st, err := s.Batch(step)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(b.QueryIDs, b.PositiveIDs, b.NegativeIDs, st.FalseNegativesAvoided, sampler.ValidateBatch(b, qrels))
	}
	// Output:
	// [{q1 d1 [d2]} {q2 d1 [d5]} {q2 d3 [d5]} {q3 d4 [d5]}] 4
	// [q1 q3] [d1 d4] [d2 d5] 2 <nil>
	// [q2 q3] [d1 d4] [d5 d5] 0 <nil>
}
