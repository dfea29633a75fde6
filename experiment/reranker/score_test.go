package reranker

import (
	"io"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// randomPairs lays out n pairs of random lengths in [3, L] (a quarter of them exactly L, as
// truncated passages are) as EncodePairBatch would: [CLS] query [SEP] passage [SEP], types 0
// then 1, padding id 0 with mask 0.
func randomPairs(n, L, vocab int, seed uint64) tokenize.Batch {
	r := rand.New(rand.NewPCG(seed, 3))
	b := tokenize.Batch{B: n, L: L, IDs: make([]int, n*L), Mask: make([]float32, n*L), Types: make([]int, n*L)}
	for i := range n {
		k := 3 + r.IntN(L-2)
		if i%4 == 0 {
			k = L
		}
		q := 1 + r.IntN(k-2)
		for j := range k {
			b.IDs[i*L+j] = 1 + r.IntN(vocab-1)
			b.Mask[i*L+j] = 1
			if j > q {
				b.Types[i*L+j] = 1
			}
		}
	}
	return b
}

// TestScorePairsBucketsMatchFixedPadding: scorePairs (pairs sorted by length, each batch padded
// to its multiple of 32) returns, in the pairs' order, the scores of one graph padded to L for
// all, within 1e-6; with L = 96, the Cranfield recipe's, and a length that is not a multiple of
// 32 (the last bucket is L).
func TestScorePairsBucketsMatchFixedPadding(t *testing.T) {
	for _, c := range []struct{ L, hidden, heads, n int }{{96, 64, 4, 230}, {72, 32, 2, 57}} {
		cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: 300, Hidden: c.hidden, Layers: 2, Heads: c.heads,
			FFN: 2 * c.hidden, MaxPosition: c.L, Dropout: 0.1, Pooling: model.PoolingCLS}
		m, err := model.NewCrossEncoder(cfg, 7)
		if err != nil {
			t.Fatal(err)
		}
		// Scores of order 1, not the 0.02 of the initial classifier, so that 1e-6 is float32 rounding.
		for i, v := range m.Param(model.ClassifierWeight).Value.Data().([]float32) {
			m.Param(model.ClassifierWeight).Value.Data().([]float32)[i] = 100 * v
		}
		enc := randomPairs(c.n, c.L, cfg.Vocab, uint64(c.L))
		fixed, err := model.NewScoreRunner(m, scoreBatch, c.L)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fixed.Score(enc.IDs, enc.Mask, enc.Types, c.n)
		fixed.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := scorePairs(m, enc, c.n, c.L, io.Discard, "test")
		if err != nil {
			t.Fatal(err)
		}
		worst, same := 0.0, 0
		for i := range want {
			d := math.Abs(float64(got[i] - want[i]))
			worst = max(worst, d)
			if math.Float32bits(got[i]) == math.Float32bits(want[i]) {
				same++
			}
		}
		t.Logf("L %d: %d pairs, max |bucketed - fixed| = %.3g, %d bit-identical; scores e.g. %v", c.L, c.n, worst, same, want[:3])
		if worst > 1e-6 {
			t.Errorf("L %d: bucketed scores differ from fixed padding by up to %g", c.L, worst)
		}
		if want[0] == want[1] {
			t.Errorf("degenerate scores %v", want[:3])
		}
	}
}

func TestBucketLen(t *testing.T) {
	for _, c := range [][3]int{{1, 96, 32}, {32, 96, 32}, {33, 96, 64}, {96, 96, 96}, {70, 72, 72}, {65, 72, 72}, {20, 256, 32}, {200, 192, 192}} {
		if got := bucketLen(c[0], c[1]); got != c[2] {
			t.Errorf("bucketLen(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
