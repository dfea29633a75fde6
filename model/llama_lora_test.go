package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var allLoRATargets = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// randomLoRA attaches adapters of every target to m with B drawn N(0, std²) (peft's B = 0
// would hide A's gradient and the merge).
func randomLoRA(t *testing.T, m *Llama, cfg LoRAConfig, std float64) *LlamaLoRA {
	t.Helper()
	l, err := NewLlamaLoRA(m, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 1))
	for _, p := range l.Params() {
		if strings.HasSuffix(p.Name, "lora_B.weight") {
			p.fill(func() float64 { return std * r.NormFloat64() })
		}
	}
	m.AttachLoRA(l)
	return l
}

// TestLlamaLoRAGradients: the log-likelihood's gradients with respect to every adapter A and B
// (all seven targets, rank 2, float64) match central differences.
func TestLlamaLoRAGradients(t *testing.T) {
	m, err := newLlama(tinyLlamaConfig(), 5, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	perturbNorms(m, 6)
	for _, p := range m.Params() {
		if p.Value.Dims() == 2 {
			d := p.Value.Data().([]float64)
			for i := range d {
				d[i] *= 15
			}
		}
	}
	l := randomLoRA(t, m, LoRAConfig{Rank: 2, Alpha: 3, Targets: allLoRATargets}, 0.5)
	if n := len(l.Params()); n != 2*7*2 {
		t.Fatalf("%d adapters, want 28", n)
	}
	b := NewBinder(gorgonia.NewGraph())
	loss := tinyLogLik(t, m, b, tensor.Float64)
	var nodes gorgonia.Nodes
	var vals []*tensor.Dense
	var names []string
	for _, p := range l.Params() {
		nodes = append(nodes, b.Node(p))
		vals = append(vals, p.Value)
		names = append(names, p.Name)
	}
	fdCheck(t, "llama lora", loss, nodes, vals, names, nil, 6, 1e-5)
}

// TestLlamaLoRAInit: peft's initialisation: B zero, A within ±1/√in and not constant, so the
// adapted model's logits equal the base model's bit for bit; bad configurations are refused.
func TestLlamaLoRAInit(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	ids, lens := []int{1, 5, 7, 2, 3, 18, 0, 0}, []int{4, 2}
	base := graphLogits(t, m, ids, lens, 4)
	l, err := NewLlamaLoRA(m, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "v_proj", "down_proj"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.Params()); n != 2*3*2 {
		t.Fatalf("%d adapters, want 12", n)
	}
	for _, p := range l.Params() {
		v := p.Value.Data().([]float32)
		in := float32(1 / math.Sqrt(float64(p.Value.Shape()[1])))
		lo, hi := v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		if strings.HasSuffix(p.Name, "lora_B.weight") && (lo != 0 || hi != 0) {
			t.Errorf("%s in [%g,%g], want 0", p.Name, lo, hi)
		}
		if strings.HasSuffix(p.Name, "lora_A.weight") && (lo < -in || hi > in || lo == hi) {
			t.Errorf("%s in [%g,%g], want spread within ±%g", p.Name, lo, hi, in)
		}
	}
	if l.Param("model.layers.1.mlp.down_proj.lora_B.weight") == nil || l.Param("model.layers.0.self_attn.k_proj.lora_A.weight") != nil {
		t.Error("adapters are not the targets'")
	}
	m.AttachLoRA(l)
	got := graphLogits(t, m, ids, lens, 4)
	for i := range base {
		if got[i] != base[i] {
			t.Fatalf("logit %d = %v with B = 0, want the base model's %v", i, got[i], base[i])
		}
	}
	for _, c := range []LoRAConfig{
		{Rank: 0, Alpha: 1, Targets: []string{"q_proj"}}, {Rank: 2, Alpha: 0, Targets: []string{"q_proj"}},
		{Rank: 2, Alpha: 1, Dropout: 1, Targets: []string{"q_proj"}}, {Rank: 2, Alpha: 1},
		{Rank: 2, Alpha: 1, Targets: []string{"lm_head"}}, {Rank: 2, Alpha: 1, Targets: []string{"q_proj", "q_proj"}},
		{Rank: 17, Alpha: 1, Targets: []string{"q_proj"}},
	} {
		if _, err := NewLlamaLoRA(m, c, 1); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestLlamaMergeLoRA: the merged model (W + Scale·B·A) gives the adapted graph's logits within
// 1e-5 (float32), through the graph and the cached decoder, and the source model is unchanged.
func TestLlamaMergeLoRA(t *testing.T) {
	m, err := NewLlama(tinyLlamaConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	randomLoRA(t, m, LoRAConfig{Rank: 3, Alpha: 6, Targets: allLoRATargets}, 0.05)
	ids, lens := []int{1, 5, 7, 2, 3, 18, 0, 0}, []int{4, 2}
	want := graphLogits(t, m, ids, lens, 4)
	merged, err := m.MergeLoRA()
	if err != nil {
		t.Fatal(err)
	}
	if merged.LoRA() != nil || m.LoRA() == nil {
		t.Fatal("MergeLoRA changed the attachment")
	}
	got := graphLogits(t, merged, ids, lens, 4)
	m.AttachLoRA(nil)
	plain := graphLogits(t, m, ids, lens, 4)
	worst, moved := 0.0, 0.0
	for i := range want {
		worst = max(worst, math.Abs(got[i]-want[i]))
		moved = max(moved, math.Abs(plain[i]-want[i]))
	}
	if worst > 1e-5 || moved < 1e-3 {
		t.Fatalf("merged logits differ by %g (want <= 1e-5); adapters move the logits by %g (want >= 1e-3)", worst, moved)
	}
	d, err := NewLlamaDecoder(merged)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.NewCache(4)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := d.Forward([]*LlamaCache{c}, [][]int{ids[:4]}, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range dl[0] {
		if math.Abs(float64(v)-want[i]) > 1e-5 {
			t.Fatalf("decoder logit %d = %v, adapted graph %v", i, v, want[i])
		}
	}
}
