package model

import (
	"math/rand/v2"
	"testing"
)

// With the last layer's FFN output zeroed, the last block returns its attention residual a, so
// the final states are ln_f(a); with ln_f's weights set to the last layer's ln_2 weights they
// equal the keys LayerNorm₂(a) exactly. With the FFN left alone they differ: the keys are not
// the final states.
func TestKeysAreLastFFNInput(t *testing.T) {
	cfg := EncoderConfig{Encoder: EncoderTransformer, Vocab: 30, Hidden: 8, Layers: 2, Heads: 2, FFN: 16, MaxPosition: 6}
	r, err := NewReader(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []string{"layer.1.ln_2.weight", "layer.1.ln_2.bias"} {
		r.Tower.byName[n].fill(func() float64 { return rng.NormFloat64() })
	}
	seqs := [][]int{{1, 2, 3, 4}, {5, 6, 7, 8, 9, 10}}
	run := func() (st, ks []float32) {
		kr, err := NewKeyRunner(r, 2, 6)
		if err != nil {
			t.Fatal(err)
		}
		defer kr.Close()
		s, k, err := kr.Run(seqs)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), s...), append([]float32(nil), k...)
	}
	st, ks := run()
	differ := 0
	for i := range st {
		if st[i] != ks[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("keys equal the final states with the FFN in place")
	}
	r.Tower.byName["layer.1.ffn.out.weight"].constant(0)
	r.Tower.byName["layer.1.ffn.out.bias"].constant(0)
	for _, s := range []string{"weight", "bias"} {
		copy(r.Tower.byName["ln_f."+s].Value.Data().([]float32), r.Tower.byName["layer.1.ln_2."+s].Value.Data().([]float32))
	}
	st, ks = run()
	for b, s := range seqs {
		for tk := range s {
			for j := 0; j < 8; j++ {
				i := (b*6+tk)*8 + j
				if st[i] != ks[i] {
					t.Fatalf("seq %d token %d dim %d: state %v, key %v", b, tk, j, st[i], ks[i])
				}
			}
		}
	}
	if _, _, err := (&KeyRunner{B: 2, L: 6}).Run([][]int{{1}, {2}, {3}}); err == nil {
		t.Error("three sequences in a batch of two accepted")
	}
}
