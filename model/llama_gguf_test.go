package model

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/gguf"
)

// TestPermuteRoPE: llama.cpp's layout puts each head's rotary pairs (i, i+dh/2) in adjacent rows.
func TestPermuteRoPE(t *testing.T) {
	hf := []float32{0, 1, 2, 3, 10, 11, 12, 13} // 2 heads of dh 4, one column
	g := permuteRoPE(hf, 2, 1)
	if want := []float32{0, 2, 1, 3, 10, 12, 11, 13}; !slices.Equal(g, want) {
		t.Errorf("permuteRoPE = %v, want %v", g, want)
	}
	if back := unpermuteRoPE(g, 2, 1); !slices.Equal(back, hf) {
		t.Errorf("unpermuteRoPE = %v, want %v", back, hf)
	}
}

// TestLlamaGGUFRoundTrip writes tiny models (tied and untied) as GGUF and loads them back.
func TestLlamaGGUFRoundTrip(t *testing.T) {
	for _, tie := range []bool{true, false} {
		cfg := tinyLlamaConfig()
		cfg.TieEmbeddings = tie
		m, err := NewLlama(cfg, 21)
		if err != nil {
			t.Fatal(err)
		}
		perturbNorms(m, 22)
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		if err := WriteLlamaGGUF(path, m, nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := LoadLlamaGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		want := m.Cfg
		want.RMSEps = float64(float32(want.RMSEps)) // GGUF stores it as float32
		if got.Cfg != want {
			t.Errorf("tie=%t: config %+v, want %+v", tie, got.Cfg, want)
		}
		for _, p := range m.Params() {
			q := got.Param(p.Name)
			if q == nil || !slices.Equal(q.Value.Data().([]float32), p.Value.Data().([]float32)) {
				t.Errorf("tie=%t: parameter %s differs after the round trip", tie, p.Name)
			}
		}
		// The file holds Q in llama.cpp's order: row 1 of GGUF's attn_q is HF's row 2 (dh 4).
		q, _, err := f.Float32("blk.0.attn_q.weight")
		if err != nil {
			t.Fatal(err)
		}
		hf := m.Param(llamaLayer(0, "self_attn.q_proj")).Value.Data().([]float32)
		if h := cfg.Hidden; !slices.Equal(q[h:2*h], hf[2*h:3*h]) {
			t.Errorf("tie=%t: GGUF attn_q row 1 is not HF's row 2", tie)
		}
	}
}

// TestLlamaGGUFRejects: metadata that contradicts the tensors or the bounds is one error naming
// the file and what is wrong.
func TestLlamaGGUFRejects(t *testing.T) {
	dir := t.TempDir()
	m, err := NewLlama(tinyLlamaConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(c *LlamaConfig)
		want string
	}{
		{"ffn", func(c *LlamaConfig) { c.FFN = 20 }, "tensor blk.0.ffn_gate.weight has shape [24 16], want [20 16]"},
		{"heads", func(c *LlamaConfig) { c.Heads, c.KVHeads = 8, 8 }, "tensor blk.0.attn_k.weight has shape [8 16], want [16 16]"},
		{"kv", func(c *LlamaConfig) { c.KVHeads = 3 }, "not a multiple of num_key_value_heads 3"},
		{"vocab", func(c *LlamaConfig) { c.Vocab = 1 << 30 }, "vocab_size = 1073741824, want 1..2097152"},
		{"layers", func(c *LlamaConfig) { c.Layers = 3 }, "no tensor blk.2.attn_norm.weight"},
		{"theta", func(c *LlamaConfig) { c.RopeTheta = 0.5 }, "rope_theta = 0.5"},
	} {
		bad := *m
		c.edit(&bad.Cfg)
		path := filepath.Join(dir, c.name+".gguf")
		if err := WriteLlamaGGUF(path, &bad, nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = LoadLlamaGGUF(f)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s and %q", c.name, err, path, c.want)
		}
	}
}

// smolLM2Path is the SmolLM2-135M-Instruct GGUF of tools/pretrained/get.sh, relative to this
// package.
const smolLM2Path = "../pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

// TestSmolLM2Logits loads the real SmolLM2-135M-Instruct (skipped when get.sh has not fetched
// it) and checks its shape and the logits of a short sequence against transformers' (the
// golden values of the comment, from LlamaForCausalLM loading the same GGUF in float32).
func TestSmolLM2Logits(t *testing.T) {
	if _, err := os.Stat(smolLM2Path); err != nil {
		t.Skip("no SmolLM2 GGUF (bash tools/pretrained/get.sh SmolLM2-135M-Instruct)")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	f, err := gguf.Open(smolLM2Path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadLlamaGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	want := LlamaConfig{Hidden: 576, Layers: 30, Heads: 9, KVHeads: 3, FFN: 1536, Vocab: 49152, RopeTheta: 100000,
		RMSEps: float64(float32(1e-5)), MaxPosition: 8192, TieEmbeddings: true}
	if m.Cfg != want {
		t.Fatalf("config %+v, want %+v", m.Cfg, want)
	}
	d, err := NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.NewCache(len(smolIDs))
	out, err := d.Forward([]*LlamaCache{c}, [][]int{smolIDs}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := m.Cfg.Vocab
	for _, g := range smolGolden {
		if got := out[0][g.pos*v+g.id]; math.Abs(float64(got)-g.logit) > 1e-3 {
			t.Errorf("logit[%d][%d] = %.6f, transformers %.6f", g.pos, g.id, got, g.logit)
		}
	}
}

// smolIDs is "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging
// Face<|im_end|>"'s start and end as token ids; smolGolden holds transformers' logits at three
// positions (the argmax and three fixed ids each).
var smolIDs = []int{1, 9690, 198, 2683, 359, 253, 5356, 5646, 11, 3175, 3589, 411, 42, 2}

var smolGolden = []struct {
	pos, id int
	logit   float64
}{
	{0, 29, 23.372129}, {0, 2, 6.322296}, {0, 100, 16.114960}, {0, 49151, 0.883560},
	{6, 11173, 21.116566}, {6, 2, -1.383519}, {6, 100, 9.959970}, {6, 49151, -2.660091},
	{13, 198, 35.154781}, {13, 2, 29.558058}, {13, 100, 23.291893}, {13, 49151, 14.130954},
}
