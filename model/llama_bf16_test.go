package model

import (
	"math"
	"slices"
	"testing"
)

// TestLlamaDecoderBF16: with bfloat16 products the cached decoder's logits, prompt by prefill
// and then one token at a time, stay as near the training graph's (bfloat16 too) as the float32
// decoder's are to its graph: every product of decoding, the steps' projections included, is a
// bfloat16 product, as SetMatmulPrecision says.
func TestLlamaDecoderBF16(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 9)
	if err != nil {
		t.Fatal(err)
	}
	perturbNorms(m, 10)
	for _, p := range m.Params() {
		if p.Value.Dims() == 2 {
			d := p.Value.Data().([]float32)
			for i := range d {
				d[i] *= 20
			}
		}
	}
	const L = 9
	seq := []int{3, 1, 4, 1, 5, 9, 2, 6, 5}
	ids := make([]int, L)
	copy(ids, seq)
	run := func(p Precision) (prefill, steps, scale float64) {
		defer SetMatmulPrecision(SetMatmulPrecision(p))
		want := graphLogits(t, m, ids, []int{L}, L)
		for _, w := range want {
			scale = max(scale, math.Abs(w))
		}
		d, err := NewLlamaDecoder(m)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := d.NewCache(L)
		v := m.Cfg.Vocab
		out, err := d.Forward([]*LlamaCache{c}, [][]int{seq[:4]}, true)
		if err != nil {
			t.Fatal(err)
		}
		for j, x := range out[0] {
			prefill = max(prefill, math.Abs(float64(x)-want[j]))
		}
		for pos := 4; pos < L; pos++ {
			out, err := d.Forward([]*LlamaCache{c}, [][]int{{seq[pos]}}, false)
			if err != nil {
				t.Fatal(err)
			}
			for j, x := range out[0] {
				steps = max(steps, math.Abs(float64(x)-want[pos*v+j]))
			}
		}
		return
	}
	fp, fs, scale := run(Float32)
	bp, bs, _ := run(BFloat16)
	t.Logf("logits up to %.3g; |decoder - graph|: float32 prefill %.3g steps %.3g; bf16 prefill %.3g steps %.3g", scale, fp, fs, bp, bs)
	if bs > 100*max(bp, fs, 1e-6) {
		t.Errorf("bf16 decoding steps differ from the bf16 graph by %.3g, the prefill by %.3g: the steps' products are not bfloat16", bs, bp)
	}
}

// TestLlamaGenerateBF16PackedWeights: with bfloat16 products Generate packs the weights once
// (bf16Weights) for its decoding steps; its tokens and log-probabilities are those of the same
// greedy decoding done step by step through Forward, whose products pack the weights at every
// call: the same bits.
func TestLlamaGenerateBF16PackedWeights(t *testing.T) {
	if !useBF16Kernel {
		t.Skip("no VDPBF16PS kernel: decoding steps go through the FMA path unpacked")
	}
	m, err := NewLlama(tinyLlamaConfig(), 9)
	if err != nil {
		t.Fatal(err)
	}
	perturbNorms(m, 10)
	defer SetMatmulPrecision(SetMatmulPrecision(BFloat16))
	d, err := NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int{{3, 1, 4, 1, 5}, {9, 2, 6}}
	const maxNew = 12
	got, err := d.Generate(prompts, SampleOptions{MaxNew: maxNew})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range prompts {
		c, _ := d.NewCache(len(p) + maxNew)
		toks := p
		var want []int
		var lp float64
		for len(want) < maxNew {
			out, err := d.Forward([]*LlamaCache{c}, [][]int{toks}, false)
			if err != nil {
				t.Fatal(err)
			}
			best, l := (&sampler{}).pick(out[0], nil) // greedy: the most probable token
			lp += l
			want = append(want, best)
			toks = []int{best}
		}
		if len(got[i].Tokens) != maxNew || !slices.Equal(got[i].Tokens, want) {
			t.Fatalf("prompt %d: Generate %v, step by step %v", i, got[i].Tokens, want)
		}
		if math.Float64bits(got[i].LogProb) != math.Float64bits(lp) {
			t.Errorf("prompt %d: log-probability %v, step by step %v", i, got[i].LogProb, lp)
		}
	}
}
