package sampler

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// worked: q1 judges d1 (2) and d5 (1) relevant and d2 non-relevant (0); q2 judges d3 relevant.
var (
	workedQrels = map[string]map[string]int{
		"q1": {"d1": 2, "d2": 0, "d5": 1},
		"q2": {"d3": 1},
		"q3": {"d9": 0}, // no relevant document: not a training query
	}
	workedRanking = map[string][]string{
		"q1": {"d1", "d2", "d3", "d4", "d5", "d6", "d7"},
		"q2": {"d3", "d1", "d2"},
	}
)

func TestMineWorked(t *testing.T) {
	cases := []struct {
		name     string
		n, lo, h int
		want     []Example
		excluded int
		short    []Shortfall
		missing  int
	}{
		{"top 2 of [1,5]", 2, 1, 5, []Example{
			{"q1", "d1", []string{"d2", "d3"}}, // d1 excluded (relevant), d2 judged 0 is a fine negative
			{"q1", "d5", []string{"d2", "d3"}},
			{"q2", "d3", []string{"d1", "d2"}}, // window clipped to the 3-long ranking
		}, 3, nil, 0},
		{"top 2 of [4,7]", 2, 4, 7, []Example{
			{"q1", "d1", []string{"d4", "d6"}}, // rank 5 (d5) is relevant, skipped
			{"q1", "d5", []string{"d4", "d6"}},
			{"q2", "d3", nil}, // nothing at ranks >= 4
		}, 1, []Shortfall{{"q2", 0}}, 2},
		{"top 3 of [1,3]", 3, 1, 3, []Example{
			{"q1", "d1", []string{"d2", "d3"}},
			{"q1", "d5", []string{"d2", "d3"}},
			{"q2", "d3", []string{"d1", "d2"}},
		}, 2, []Shortfall{{"q1", 2}, {"q2", 2}}, 3},
		{"no negatives", 0, 1, 1, []Example{{"q1", "d1", nil}, {"q1", "d5", nil}, {"q2", "d3", nil}}, 0, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, st, err := Mine(workedQrels, workedRanking, MineOptions{Negatives: c.n, Lo: c.lo, Hi: c.h, Strategy: Top})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d examples, want %d: %v", len(got), len(c.want), got)
			}
			for i := range got {
				if got[i].QueryID != c.want[i].QueryID || got[i].PositiveID != c.want[i].PositiveID || !slices.Equal(got[i].NegativeIDs, c.want[i].NegativeIDs) {
					t.Errorf("example %d = %v, want %v", i, got[i], c.want[i])
				}
			}
			if st.Queries != 2 || st.Examples != 3 || st.ExcludedRelevant != c.excluded || !slices.Equal(st.Short, c.short) || st.Missing != c.missing {
				t.Errorf("stats %+v, want 2 queries, 3 examples, excluded %d, short %v, missing %d", st, c.excluded, c.short, c.missing)
			}
		})
	}
}

func TestMineRandomUniform(t *testing.T) {
	// 12 ranked documents, 2 of them relevant: 10 eligible in the window [1, 12]
	ranked := make([]string, 12)
	for i := range ranked {
		ranked[i] = fmt.Sprintf("d%02d", i+1)
	}
	qrels := map[string]map[string]int{"q": {"d03": 1, "d07": 2}}
	ranking := map[string][]string{"q": ranked}
	const seeds, n = 3000, 3
	count := map[string]int{}
	var first []string
	for seed := range uint64(seeds) {
		ex, st, err := Mine(qrels, ranking, MineOptions{Negatives: n, Lo: 1, Hi: 12, Strategy: Random, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(ex) != 2 || st.ExcludedRelevant != 2 || len(st.Short) != 0 {
			t.Fatalf("seed %d: %d examples, stats %+v", seed, len(ex), st)
		}
		for _, e := range ex {
			negs := e.NegativeIDs
			if len(negs) != n || !slices.IsSorted(negs) || len(slices.Compact(slices.Clone(negs))) != n {
				t.Fatalf("seed %d: negatives %v: want %d distinct, in rank order", seed, negs, n)
			}
			for _, d := range negs {
				if qrels["q"][d] > 0 {
					t.Fatalf("seed %d: relevant %s drawn", seed, d)
				}
				count[d]++
			}
		}
		if seed == 0 {
			first = ex[0].NegativeIDs
		}
	}
	// same seed, same draw
	again, _, _ := Mine(qrels, ranking, MineOptions{Negatives: n, Lo: 1, Hi: 12, Strategy: Random, Seed: 0})
	if !slices.Equal(again[0].NegativeIDs, first) {
		t.Fatalf("seed 0 drew %v then %v", first, again[0].NegativeIDs)
	}
	// each eligible document is drawn with probability 3/10 per example: 2·3000·0.3 = 1800 times,
	// standard deviation sqrt(6000·0.3·0.7) ≈ 35.5; allow 5 deviations
	if len(count) != 10 {
		t.Fatalf("drew %d distinct documents, want the 10 eligible", len(count))
	}
	for d, k := range count {
		if math.Abs(float64(k)-1800) > 5*35.5 {
			t.Errorf("%s drawn %d times, want 1800 ± 178", d, k)
		}
	}
}

func TestMineErrors(t *testing.T) {
	cases := []struct {
		name    string
		o       MineOptions
		ranking map[string][]string
		want    string
	}{
		{"lo 0", MineOptions{Negatives: 1, Lo: 0, Hi: 5, Strategy: Top}, workedRanking, "negative_window = [0, 5]"},
		{"hi < lo", MineOptions{Negatives: 1, Lo: 5, Hi: 4, Strategy: Top}, workedRanking, "negative_window = [5, 4]"},
		{"strategy", MineOptions{Negatives: 1, Lo: 1, Hi: 4, Strategy: "best"}, workedRanking, `negative_strategy = "best"`},
		{"negative n", MineOptions{Negatives: -1, Lo: 1, Hi: 4, Strategy: Top}, workedRanking, "hard_negatives = -1"},
		{"missing ranking", MineOptions{Negatives: 1, Lo: 1, Hi: 4, Strategy: Top}, map[string][]string{"q1": {"d2"}}, `no mining ranking for training query "q2"`},
		{"duplicate", MineOptions{Negatives: 1, Lo: 1, Hi: 4, Strategy: Top},
			map[string][]string{"q1": {"d2", "d4", "d2"}, "q2": {"d1"}}, `ranking of query "q1" lists document "d2" twice (ranks 1 and 3)`},
	}
	for _, c := range cases {
		_, _, err := Mine(workedQrels, c.ranking, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// TestMineCranfield mines the real training qrels: no negative is judged relevant to its query,
// every negative lies in the window, and with Top every judged-non-relevant document of the
// window is kept.
func TestMineCranfield(t *testing.T) {
	c := loadCranfield(t)
	rank := func(q, d string) int { return slices.Index(c.ranking[q], d) + 1 }
	for _, o := range []MineOptions{
		{Negatives: 1, Lo: 1, Hi: 30, Strategy: Random, Seed: 42},
		{Negatives: 4, Lo: 11, Hi: 40, Strategy: Random, Seed: 7},
		{Negatives: 30, Lo: 1, Hi: 30, Strategy: Top},
	} {
		ex, st, err := Mine(c.train, c.ranking, o)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queries != 112 || st.Examples != 814 || len(ex) != 814 {
			t.Fatalf("%+v: %d queries, %d examples; want 112, 814", o, st.Queries, len(ex))
		}
		if st.ExcludedRelevant == 0 {
			t.Fatalf("%+v: no relevant document met in the windows: the exclusion went untested", o)
		}
		keptZero, missing := 0, 0
		for _, e := range ex {
			if c.train[e.QueryID][e.PositiveID] <= 0 {
				t.Fatalf("positive %s of %s not relevant", e.PositiveID, e.QueryID)
			}
			missing += o.Negatives - len(e.NegativeIDs)
			for _, d := range e.NegativeIDs {
				if c.train[e.QueryID][d] > 0 {
					t.Fatalf("%+v: negative %s judged relevant (%d) to query %s", o, d, c.train[e.QueryID][d], e.QueryID)
				}
				if r := rank(e.QueryID, d); r < o.Lo || r > o.Hi {
					t.Fatalf("%+v: negative %s of query %s at rank %d, outside the window", o, d, e.QueryID, r)
				}
				if s, judged := c.train[e.QueryID][d]; judged && s == 0 {
					keptZero++
				}
			}
			if o.Strategy == Top {
				for r := o.Lo; r <= o.Hi; r++ {
					d := c.ranking[e.QueryID][r-1]
					if s, judged := c.train[e.QueryID][d]; judged && s == 0 && !slices.Contains(e.NegativeIDs, d) {
						t.Fatalf("judged non-relevant %s at rank %d of query %s not kept", d, r, e.QueryID)
					}
				}
			}
		}
		if missing != st.Missing {
			t.Fatalf("stats say %d missing negatives, counted %d", st.Missing, missing)
		}
		if o.Strategy == Top && (len(st.Short) == 0 || keptZero == 0) {
			t.Fatalf("top 30 of [1,30]: every query with a relevant document in its top 30 is short (got %d), and judged-0 documents must be kept (got %d)", len(st.Short), keptZero)
		}
		t.Logf("%+v: excluded %d relevant, %d short queries, %d missing, %d judged-0 negatives", o, st.ExcludedRelevant, len(st.Short), st.Missing, keptZero)
	}
}
