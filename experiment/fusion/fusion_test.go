package fusion

import (
	"io"
	"math"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/knnlm"
	"github.com/ragtrain/ragtrain/model"
)

func tinyReader(t *testing.T) *model.Reader {
	t.Helper()
	r, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: 30, Hidden: 8, Layers: 2, Heads: 2, FFN: 16, MaxPosition: 12}, 5)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Hand-computed: p_LM(target) = 0.5 and every neighbour names the target (p_kNN = 1): at λ =
// 0.25, p = 0.25 + 0.75·0.5 = 0.625 and the perplexity of such tokens is 1/0.625 = 1.6; at λ = 0
// it is 2. A token whose neighbours name another value gets 0.75·0.5 = 0.375.
func TestPerplexityHandComputed(t *testing.T) {
	hit := tokenNLL{Target: 3, LogLM: math.Log(0.5), NB: []knnlm.Neighbor{{Value: 3, Dist: 1}, {Value: 3, Dist: 2}}}
	miss := tokenNLL{Target: 4, LogLM: math.Log(0.5), NB: []knnlm.Neighbor{{Value: 3, Dist: 1}}}
	if p := perplexity([]tokenNLL{hit, hit}, 1, 0.25, nil); math.Abs(p-1.6) > 1e-12 {
		t.Errorf("perplexity %v, want 1.6", p)
	}
	if p := perplexity([]tokenNLL{hit}, 1, 0, nil); math.Abs(p-2) > 1e-12 {
		t.Errorf("λ = 0: %v, want 2", p)
	}
	want := math.Exp(-(math.Log(0.625) + math.Log(0.375)) / 2)
	if p := perplexity([]tokenNLL{hit, miss}, 1, 0.25, nil); math.Abs(p-want) > 1e-12 {
		t.Errorf("mixed: %v, want %v", p, want)
	}
	if p := perplexity([]tokenNLL{hit, miss}, 1, 0.25, func(v int) bool { return v == 4 }); math.Abs(p-1/0.375) > 1e-12 {
		t.Errorf("only token 4: %v, want %v", p, 1/0.375)
	}
	if p := perplexity(nil, 1, 0.25, nil); !math.IsNaN(p) {
		t.Errorf("no tokens: %v", p)
	}
}

// The datastore holds one pair per position but the last of every row, valued by the next
// token, keyed as the row alone would key it (batching does not change a key).
func TestBuildStore(t *testing.T) {
	r := tinyReader(t)
	e, err := newEngine(r, 12, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rows := [][]int{{1, 2, 3, 4}, {5, 6}, {7, 8, 9, 10, 11, 12, 13}}
	s, err := e.buildStore(rows, knnlm.Float32, "test")
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3+1+6 {
		t.Fatalf("%d pairs, want 10", s.Len())
	}
	want := []int32{2, 3, 4, 6, 8, 9, 10, 11, 12, 13}
	if !slices.Equal(s.Values, want) {
		t.Errorf("values %v, want %v", s.Values, want)
	}
	_, keys, err := e.kr.Run(rows[2:3])
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 8)
	for tk := 0; tk < 6; tk++ {
		s.Key(4+tk, got)
		for j := range got {
			if d := math.Abs(float64(got[j] - keys[tk*8+j])); d > 1e-6 {
				t.Fatalf("row 2 token %d: key differs by %g from the row run alone", tk, d)
			}
		}
	}
}

// At λ = 0 decoding is the reader's greedy decoding (model.ReaderRunner); at λ = 1 with every
// key valued 7 it writes 7 until maxNew.
func TestDecode(t *testing.T) {
	r := tinyReader(t)
	e, err := newEngine(r, 12, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompts := [][]int{{1, 2, 3}, nil, {4, 5}, {6}}
	const stop = 29
	res, _, err := e.decode("test", prompts, nil, nil, 1, 0, 4, []int{stop})
	if err != nil {
		t.Fatal(err)
	}
	rr, err := model.NewReaderRunner(r, 3, 12)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	gens, err := rr.Greedy([][]int{{1, 2, 3}, {4, 5}, {6}}, 4, stop)
	if err != nil {
		t.Fatal(err)
	}
	for j, i := range []int{0, 2, 3} {
		if !slices.Equal(res[i].Tokens, gens[j].Tokens) || res[i].Stopped != gens[j].Stopped {
			t.Errorf("prompt %d: %v (stopped %v), greedy %v (stopped %v)", i, res[i].Tokens, res[i].Stopped, gens[j].Tokens, gens[j].Stopped)
		}
	}
	if res[1].Tokens != nil {
		t.Error("a nil prompt was decoded")
	}
	s, _ := knnlm.NewStore(8, knnlm.Float16)
	for i := 0; i < 5; i++ {
		_ = s.Add([]float32{float32(i), 1, 0, 0, 0, 0, 0, 1}, 7)
	}
	cache, m := newCachedSearch(s, 3), memo{}
	res, steps, err := e.decode("test", prompts, cache, m, 1, 1, 4, []int{stop})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2, 3} {
		if !slices.Equal(res[i].Tokens, []int{7, 7, 7, 7}) || res[i].Stopped {
			t.Errorf("λ = 1, prompt %d: %v", i, res[i].Tokens)
		}
	}
	if steps != 12 || cache.Searches != 12 {
		t.Errorf("%d steps and %d searches, want 12 each", steps, cache.Searches)
	}
	// The same contexts again: all cached.
	again, _, err := e.decode("test", prompts, cache, m, 1, 1, 4, []int{stop})
	if err != nil || cache.Searches != 12 || len(m) != 12 {
		t.Errorf("repeated decode searched again: %d searches, %d contexts memoised (%v)", cache.Searches, len(m), err)
	}
	for _, i := range []int{0, 2, 3} {
		if !slices.Equal(again[i].Tokens, res[i].Tokens) {
			t.Errorf("memoised decode of prompt %d: %v, first %v", i, again[i].Tokens, res[i].Tokens)
		}
	}
}

func TestProgressRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p, err := readProgress(dir)
	if err != nil || len(p.Done) != 0 {
		t.Fatalf("fresh: %v %v", p, err)
	}
	if err := p.finish(dir, "perplexity", map[string]float64{"knnlm/ppl_test": 3.5}); err != nil {
		t.Fatal(err)
	}
	q, err := readProgress(dir)
	if err != nil || !q.done("perplexity") || q.done("qa") || q.Metrics["knnlm/ppl_test"] != 3.5 {
		t.Errorf("read back %+v (%v)", q, err)
	}
}
