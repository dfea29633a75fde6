package sampler

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// listWorld is 6 queries over 40 passages d0..d39. Query qi's ranking is the 12 passages
// d(i), d(i+1), ..., d(i+11). Query qi judges d(i+3) relevant (grade 1 + i%3) and, for even
// i, d(i+30) too (not retrieved); d(i+1) is judged non-relevant (score 0). Query q5 judges
// nothing relevant, so it is not a training query.
func listWorld() (Collection, map[string][]string) {
	c := Collection{Queries: map[string]string{}, Qrels: map[string]map[string]int{}}
	for d := range 40 {
		c.DocIDs = append(c.DocIDs, fmt.Sprint("d", d))
		c.DocTexts = append(c.DocTexts, fmt.Sprint("text ", d))
	}
	ranking := map[string][]string{}
	for i := range 6 {
		q := fmt.Sprint("q", i)
		c.Queries[q] = "query " + q
		c.Qrels[q] = map[string]int{fmt.Sprint("d", i+1): 0}
		if i < 5 {
			c.Qrels[q][fmt.Sprint("d", i+3)] = 1 + i%3
			if i%2 == 0 {
				c.Qrels[q][fmt.Sprint("d", i+30)] = 2
			}
		}
		for d := i; d < i+12; d++ {
			ranking[q] = append(ranking[q], fmt.Sprint("d", d))
		}
	}
	return c, ranking
}

func TestListsHoldOnePositiveAndNegatives(t *testing.T) {
	c, ranking := listWorld()
	l, st, err := NewLists(c, ranking, ListOptions{Size: 5, BatchSize: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := ListStats{Queries: 5, Candidates: 60, Relevant: 5}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if l.BatchesPerEpoch() != 2 {
		t.Errorf("%d batches per epoch, want floor(5/2) = 2", l.BatchesPerEpoch())
	}
	// q0's negatives: its ranking without the relevant d3, in rank order; the judged
	// non-relevant d1 stays.
	if got := l.Negatives("q0"); !slices.Equal(got, []string{"d0", "d1", "d2", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11"}) {
		t.Errorf("q0 negatives %v", got)
	}
	positives := map[string]bool{}
	for step := range 40 {
		b, err := l.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateLists(b, c.Qrels); err != nil {
			t.Fatal(err)
		}
		if b.RandomFills != 0 {
			t.Errorf("step %d: %d random fills with 11 negatives per query", step, b.RandomFills)
		}
		for i, q := range b.QueryIDs {
			if q == "q5" {
				t.Fatalf("step %d: q5 has no relevant passage but got a list", step)
			}
			positives[q+"/"+b.DocIDs[i*5]] = true
			// negatives come from the query's ranking, in rank order
			rank := func(d string) int { return slices.Index(ranking[q], d) }
			for j := 1; j < 5; j++ {
				if rank(b.DocIDs[i*5+j]) < 0 || (j > 1 && rank(b.DocIDs[i*5+j]) < rank(b.DocIDs[i*5+j-1])) {
					t.Fatalf("step %d list %d: negatives %v not in the ranking's order", step, i, b.DocIDs[i*5+1:i*5+5])
				}
			}
		}
		if got := b.PairQueries(); len(got) != 10 || got[4] != b.Queries[0] || got[5] != b.Queries[1] {
			t.Fatalf("pair queries %q", got)
		}
	}
	// Every judged-relevant passage, retrieved (d(i+3)) or not (d(i+30)), serves as a positive.
	for _, k := range []string{"q0/d3", "q0/d30", "q1/d4", "q2/d5", "q2/d32", "q4/d7", "q4/d34"} {
		if !positives[k] {
			t.Errorf("positive %s never drawn in 40 steps", k)
		}
	}
	// Graded labels: q2's d5 has grade 1 + 2%3 = 3.
	for step := range 10 {
		b, _ := l.Batch(step)
		for i, q := range b.QueryIDs {
			if q == "q2" && b.DocIDs[i*5] == "d5" && b.Labels[i*5] != 3 {
				t.Errorf("q2/d5 labelled %d, want 3", b.Labels[i*5])
			}
		}
	}
}

func TestListsAreAFunctionOfSeedAndStep(t *testing.T) {
	c, ranking := listWorld()
	a, _, _ := NewLists(c, ranking, ListOptions{Size: 4, BatchSize: 2, Seed: 1})
	b, _, _ := NewLists(c, ranking, ListOptions{Size: 4, BatchSize: 2, Seed: 1})
	other, _, _ := NewLists(c, ranking, ListOptions{Size: 4, BatchSize: 2, Seed: 2})
	differ := false
	for _, step := range []int{5, 0, 3, 5} { // any order, repeated: the same batch
		x, _ := a.Batch(step)
		y, _ := b.Batch(step)
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("step %d differs between two samplers of one seed", step)
		}
		z, _ := other.Batch(step)
		differ = differ || !reflect.DeepEqual(x.DocIDs, z.DocIDs)
	}
	if !differ {
		t.Error("seeds 1 and 2 deal the same lists")
	}
	// An epoch of 2 batches covers 4 distinct queries of the 5.
	seen := map[string]bool{}
	for step := 6; step < 8; step++ {
		x, _ := a.Batch(step)
		for _, q := range x.QueryIDs {
			if seen[q] {
				t.Fatalf("query %s twice in epoch 3", q)
			}
			seen[q] = true
		}
	}
}

// TestDropAboveFirstPositive: q3 ranks d3..d14 with its relevant d6 at rank 4 and the judged
// non-relevant d4 at rank 2: the unjudged d3 and d5 are dropped, d4 stays.
func TestDropAboveFirstPositive(t *testing.T) {
	c, ranking := listWorld()
	l, st, err := NewLists(c, ranking, ListOptions{Size: 5, BatchSize: 2, Seed: 7, DropAboveFirstPositive: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Negatives("q3"); !slices.Equal(got, []string{"d4", "d7", "d8", "d9", "d10", "d11", "d12", "d13", "d14"}) {
		t.Errorf("q3 negatives %v", got)
	}
	// every query of the 5 drops its 2 unjudged passages above its relevant one at rank 4
	if st.Dropped != 10 {
		t.Errorf("dropped %d, want 10", st.Dropped)
	}
	for step := range 20 {
		b, _ := l.Batch(step)
		for i, q := range b.QueryIDs {
			var k int
			fmt.Sscanf(q, "q%d", &k)
			for _, d := range b.DocIDs[i*5+1 : i*5+5] {
				if d == fmt.Sprint("d", k) || d == fmt.Sprint("d", k+2) {
					t.Fatalf("step %d: %s has the dropped %s as a negative", step, q, d)
				}
			}
		}
	}

	// A ranking without any judged-relevant passage drops nothing.
	ranking["q0"] = []string{"d20", "d21", "d22", "d23", "d24"}
	_, st, err = NewLists(c, ranking, ListOptions{Size: 5, BatchSize: 2, Seed: 7, DropAboveFirstPositive: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.NoRelevant, []string{"q0"}) || st.Dropped != 8 {
		t.Errorf("no-relevant %v, dropped %d; want [q0], 8", st.NoRelevant, st.Dropped)
	}
}

// TestShortListsAreFilled: with 3 candidates, lists of 6 take every negative and fill the rest
// with random passages not judged relevant.
func TestShortListsAreFilled(t *testing.T) {
	c, ranking := listWorld()
	for q := range ranking {
		ranking[q] = ranking[q][:3]
	}
	l, st, err := NewLists(c, ranking, ListOptions{Size: 6, BatchSize: 5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Short) != 5 {
		t.Errorf("short queries %v, want all 5", st.Short)
	}
	b, err := l.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateLists(b, c.Qrels); err != nil {
		t.Fatal(err)
	}
	// q0: 3 candidates d0, d1, d2, none relevant: 3 negatives, 2 fills; q1..q4 likewise with
	// d(i+3) out of reach, so 5 lists x 2 fills.
	if b.RandomFills != 10 {
		t.Errorf("random fills %d, want 10", b.RandomFills)
	}
}

func TestListErrors(t *testing.T) {
	c, ranking := listWorld()
	cases := []struct {
		name string
		edit func(c *Collection, r map[string][]string, o *ListOptions)
		want string
	}{
		{"size 1", func(c *Collection, r map[string][]string, o *ListOptions) { o.Size = 1 }, "list size 1"},
		{"batch too big", func(c *Collection, r map[string][]string, o *ListOptions) { o.BatchSize = 6 }, "exceed the 5 training queries"},
		{"no ranking", func(c *Collection, r map[string][]string, o *ListOptions) { delete(r, "q2") }, `training query "q2"`},
		{"unknown passage", func(c *Collection, r map[string][]string, o *ListOptions) { r["q1"] = []string{"d1", "zz"} },
			`passage "zz" (rank 2) is not in the corpus`},
		{"duplicate", func(c *Collection, r map[string][]string, o *ListOptions) { r["q1"] = []string{"d1", "d2", "d1"} },
			`lists passage "d1" twice (ranks 1 and 3)`},
		{"no text", func(c *Collection, r map[string][]string, o *ListOptions) { delete(c.Queries, "q4") }, `"q4" has no text`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c2 := c
			c2.Queries = map[string]string{}
			for k, v := range c.Queries {
				c2.Queries[k] = v
			}
			r2 := map[string][]string{}
			for k, v := range ranking {
				r2[k] = v
			}
			o := ListOptions{Size: 4, BatchSize: 2}
			tc.edit(&c2, r2, &o)
			_, _, err := NewLists(c2, r2, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// ValidateLists catches a negative judged relevant and a positive that is not.
	l, _, _ := NewLists(c, ranking, ListOptions{Size: 4, BatchSize: 2})
	b, _ := l.Batch(0)
	q := b.QueryIDs[0]
	bad := b
	bad.DocIDs = slices.Clone(b.DocIDs)
	bad.DocIDs[0], bad.DocIDs[1] = b.DocIDs[1], b.DocIDs[0]
	if err := ValidateLists(bad, c.Qrels); err == nil {
		t.Errorf("swapped positive and negative of %s passed validation", q)
	}
}
