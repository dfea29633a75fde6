package model

import (
	"math/rand/v2"
	"slices"
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

// The LLaMA decoder's keys: with the last layer's down_proj zeroed and the final norm's weight
// set to the last post_attention_layernorm's, the head scores the keys themselves: logits =
// key · headᵀ for every returned row (within float32 rounding); with the MLP in place they do not.
func TestLlamaKeysAreLastMLPInput(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 4)
	if err != nil {
		t.Fatal(err)
	}
	perturbNorms(m, 2)
	check := func(wantEqual bool) {
		d, err := NewLlamaDecoder(m)
		if err != nil {
			t.Fatal(err)
		}
		d.KeepKeys = true
		toks := [][]int{{1, 2, 3}, {4, 5}}
		caches := []*LlamaCache{}
		for range toks {
			c, err := d.NewCache(8)
			if err != nil {
				t.Fatal(err)
			}
			caches = append(caches, c)
		}
		logits, err := d.Forward(caches, toks, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Keys) != 5*16 {
			t.Fatalf("%d key values, want 5 rows of 16", len(d.Keys))
		}
		head := m.HeadParam().Value.Data().([]float32)
		var worst float64
		row := 0
		for s := range toks {
			for j := range toks[s] {
				for v := 0; v < 19; v++ {
					var z float64
					for k := 0; k < 16; k++ {
						z += float64(d.Keys[row*16+k]) * float64(head[v*16+k])
					}
					worst = max(worst, abs64(z-float64(logits[s][j*19+v])))
				}
				row++
			}
		}
		if wantEqual && worst > 1e-4 {
			t.Errorf("logits differ from key · headᵀ by %g", worst)
		}
		if !wantEqual && worst < 1e-3 {
			t.Errorf("with the MLP in place the logits equal key · headᵀ (%g)", worst)
		}
	}
	check(false)
	m.Param(llamaLayer(1, "mlp.down_proj")).constant(0)
	copy(m.Param(LlamaFinalNorm).Value.Data().([]float32), m.Param(llamaLayer(1, "post_attention_layernorm")).Value.Data().([]float32))
	check(true)
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// ForwardKeys: the keys of Forward(all) with KeepKeys, bit for bit, for two sequences with
// cached prefixes of different lengths; the caches advance as Forward's do (a next step scores
// the same logits after either), and the decoder's KeepKeys and Keys are left as they were.
func TestLlamaForwardKeys(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 4)
	if err != nil {
		t.Fatal(err)
	}
	perturbNorms(m, 2)
	d, err := NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	prefix, toks := [][]int{{7}, {8, 9}}, [][]int{{1, 2, 3}, {4, 5}}
	run := func(keysOnly bool) ([]float32, [][]float32) {
		var caches []*LlamaCache
		for s := range toks {
			c, err := d.NewCache(8)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Forward([]*LlamaCache{c}, [][]int{prefix[s]}, false); err != nil {
				t.Fatal(err)
			}
			caches = append(caches, c)
		}
		var keys []float32
		if keysOnly {
			d.KeepKeys, d.Keys = false, []float32{42}
			if keys, err = d.ForwardKeys(caches, toks); err != nil {
				t.Fatal(err)
			}
			if d.KeepKeys || len(d.Keys) != 1 || d.Keys[0] != 42 {
				t.Fatalf("KeepKeys %v, Keys %v after ForwardKeys: not restored", d.KeepKeys, d.Keys)
			}
		} else {
			d.KeepKeys = true
			if _, err := d.Forward(caches, toks, true); err != nil {
				t.Fatal(err)
			}
			keys, d.KeepKeys = d.Keys, false
		}
		next, err := d.Forward(caches, [][]int{{6}, {6}}, false)
		if err != nil {
			t.Fatal(err)
		}
		return keys, next
	}
	want, wantNext := run(false)
	got, gotNext := run(true)
	if len(want) != 5*16 || !slices.Equal(got, want) {
		t.Fatalf("ForwardKeys: %d values, differ from Forward's %d", len(got), len(want))
	}
	for s := range wantNext {
		if !slices.Equal(gotNext[s], wantNext[s]) {
			t.Errorf("sequence %d: the step after ForwardKeys scores differently from the step after Forward", s)
		}
	}
}

// BenchmarkLlamaDatastorePass: one 256-token sequence through a randomly initialised LLaMA of
// SmolLM2-135M's shapes (H 576, 30 layers, 9 / 3 heads, FFN 1536, V 49,152), as the kNN-LM
// datastore builder runs it: Forward(all) with KeepKeys (every row's logits too) against
// ForwardKeys (keys only; no last MLP, final norm or head).
func BenchmarkLlamaDatastorePass(b *testing.B) {
	cfg := LlamaConfig{Hidden: 576, Layers: 30, Heads: 9, KVHeads: 3, FFN: 1536, Vocab: 49152, RopeTheta: 100000, RMSEps: 1e-5,
		MaxPosition: 2048, TieEmbeddings: true}
	m, err := NewLlama(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewLlamaDecoder(m)
	if err != nil {
		b.Fatal(err)
	}
	seq := make([]int, 256)
	for i := range seq {
		seq[i] = (i*7919 + 13) % cfg.Vocab
	}
	for _, keysOnly := range []bool{false, true} {
		name := "forward_all"
		if keysOnly {
			name = "forward_keys"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				c, err := d.NewCache(len(seq))
				if err != nil {
					b.Fatal(err)
				}
				if keysOnly {
					_, err = d.ForwardKeys([]*LlamaCache{c}, [][]int{seq})
				} else {
					d.KeepKeys = true
					_, err = d.Forward([]*LlamaCache{c}, [][]int{seq}, true)
					d.KeepKeys = false
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
