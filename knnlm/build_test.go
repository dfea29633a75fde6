package knnlm

import (
	"math"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/model"
)

// BuildLlama: one pair per position but the last, valued by the next token; the key of
// position t is the key of the prefix up to t run alone (causal), and the decoder's KeepKeys is
// restored.
func TestBuildLlama(t *testing.T) {
	m, err := model.NewLlama(model.LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: 19, RopeTheta: 1000, RMSEps: 1e-5, MaxPosition: 32, TieEmbeddings: true}, 4)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	s, err := BuildLlama(d, [][]int{{1, 2, 3, 4}, {7}, {5, 6}}, Float16, func(n int) { seen += n })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Values, []int32{2, 3, 4, 6}) || seen != 2 || d.KeepKeys {
		t.Fatalf("values %v, %d sequences reported, KeepKeys %v", s.Values, seen, d.KeepKeys)
	}
	d.KeepKeys = true
	c, _ := d.NewCache(2)
	if _, err := d.Forward([]*model.LlamaCache{c}, [][]int{{1, 2}}, false); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 16)
	s.Key(1, got)
	for j, k := range d.Keys {
		if math.Abs(float64(got[j]-k)) > 2e-3*math.Max(1, math.Abs(float64(k))) { // float16 rounding
			t.Fatalf("key of (sequence 0, token 1) dim %d: %v, prefix alone %v", j, got[j], k)
		}
	}
}

// BuildReader: the same over the garden GPT-2 reader, in batches smaller than the rows.
func TestBuildReader(t *testing.T) {
	r, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: 30, Hidden: 8, Layers: 2, Heads: 2, FFN: 16, MaxPosition: 8}, 5)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := model.NewKeyRunner(r, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer kr.Close()
	s, err := BuildReader(kr, [][]int{{1, 2, 3}, {4, 5}, {6, 7, 8, 9}}, Float32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Values, []int32{2, 3, 5, 7, 8, 9}) {
		t.Errorf("values %v", s.Values)
	}
	_, keys, _ := kr.Run([][]int{{6, 7}})
	got := make([]float32, 8)
	s.Key(4, got) // row 2, token 1
	for j := range got {
		if math.Abs(float64(got[j]-keys[8+j])) > 1e-5 {
			t.Fatalf("key dim %d: %v, prefix alone %v", j, got[j], keys[8+j])
		}
	}
}
