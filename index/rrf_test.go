package index

import (
	"math"
	"testing"
)

func TestRRF(t *testing.T) {
	bm25 := map[string][]Hit{
		"q1": {{"a", 9}, {"b", 8}, {"c", 7}},
		"q2": {{"x", 1}},
	}
	dense := map[string][]Hit{
		"q1": {{"b", 0.9}, {"c", 0.8}, {"d", 0.7}, {"b", 0.1}}, // repeated b counts at rank 1
		"q3": {{"y", 0.5}, {"z", 0.5}},
	}
	type want struct {
		id    string
		score float64
	}
	tests := []struct {
		name  string
		k     int
		depth int
		q     string
		want  []want
	}{
		{"k=60 all", 60, 0, "q1", []want{
			{"b", 1.0/62 + 1.0/61}, {"c", 1.0/63 + 1.0/62}, {"a", 1.0 / 61}, {"d", 1.0 / 63}}},
		{"depth 2", 60, 2, "q1", []want{{"b", 1.0/62 + 1.0/61}, {"a", 1.0 / 61}, {"c", 1.0 / 62}}},
		{"k=0", 0, 0, "q1", []want{{"b", 1.5}, {"a", 1}, {"c", 1.0/3 + 1.0/2}, {"d", 1.0 / 3}}},
		{"one run only", 60, 0, "q2", []want{{"x", 1.0 / 61}}},
		{"rank not score", 60, 0, "q3", []want{{"y", 1.0 / 61}, {"z", 1.0 / 62}}},
	}
	for _, tt := range tests {
		fused := RRF(tt.k, tt.depth, bm25, dense)
		if len(fused) != 3 {
			t.Errorf("%s: %d queries, want 3", tt.name, len(fused))
		}
		got := fused[tt.q]
		if len(got) != len(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
			continue
		}
		for i, w := range tt.want {
			if got[i].DocID != w.id || math.Abs(got[i].Score-w.score) > 1e-15 {
				t.Errorf("%s: rank %d = %v, want %v", tt.name, i+1, got[i], w)
			}
		}
	}
	// Equal fused scores go by DocID ascending.
	tied := RRF(60, 0, map[string][]Hit{"q": {{"m", 1}}}, map[string][]Hit{"q": {{"k", 1}}})
	if tied["q"][0].DocID != "k" || tied["q"][0].Score != tied["q"][1].Score {
		t.Errorf("tie: %v, want k before m", tied["q"])
	}
}
