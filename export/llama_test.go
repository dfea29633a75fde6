package export

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/model"
	"gorgonia.org/gorgonia"
)

// TestLlamaGolden: tiny random LlamaForCausalLM checkpoints saved by transformers (float32 with
// tied embeddings, bfloat16 with an untied head; tools/interop/llama_golden.py) load through
// OpenLlamaHF, and both the training graph (Llama.BuildLogits) and the cached decoder give
// transformers' logits within 2e-5 (golden.json, written by the same script), so the
// architecture -- RMSNorm, rotate_half RoPE with rope_theta, grouped-query attention, SwiGLU,
// the head -- is pinned without Python.
func TestLlamaGolden(t *testing.T) {
	for _, name := range []string{"llama-tiny-f32", "llama-tiny-bf16"} {
		dir := filepath.Join("testdata", name)
		m, err := OpenLlamaHF(dir)
		if err != nil {
			t.Fatal(err)
		}
		var gold struct {
			IDs    [][]int       `json:"ids"`
			Logits [][][]float64 `json:"logits"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &gold); err != nil {
			t.Fatal(err)
		}
		B, L, V := len(gold.IDs), len(gold.IDs[0]), m.Cfg.Vocab
		g := gorgonia.NewGraph()
		in := model.NewInputs(g, B, L, "in")
		var ids []int
		mask := make([]float32, B*L)
		for _, s := range gold.IDs {
			ids = append(ids, s...)
		}
		for i := range mask {
			mask[i] = 1
		}
		if err := in.Let(ids, mask, nil); err != nil {
			t.Fatal(err)
		}
		out, err := m.BuildLogits(model.NewBinder(g), in)
		if err != nil {
			t.Fatal(err)
		}
		vm := gorgonia.NewTapeMachine(g)
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		graph := out.Value().Data().([]float32)
		vm.Close()
		d, err := model.NewLlamaDecoder(m)
		if err != nil {
			t.Fatal(err)
		}
		var worstGraph, worstDec, scale float64
		for b, s := range gold.IDs {
			c, _ := d.NewCache(L)
			// the first 5 tokens as a prompt, the rest one by one
			rows := make([]float32, 0, L*V)
			l, err := d.Forward([]*model.LlamaCache{c}, [][]int{s[:5]}, true)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, l[0]...)
			for _, id := range s[5:] {
				l, err := d.Forward([]*model.LlamaCache{c}, [][]int{{id}}, false)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, l[0]...)
			}
			for p := 0; p < L; p++ {
				for v := 0; v < V; v++ {
					want := gold.Logits[b][p][v]
					scale = max(scale, math.Abs(want))
					worstGraph = max(worstGraph, math.Abs(float64(graph[(b*L+p)*V+v])-want))
					worstDec = max(worstDec, math.Abs(float64(rows[p*V+v])-want))
				}
			}
		}
		t.Logf("%s: max |logit| %.3g; max abs diff graph %.3g, decoder %.3g", name, scale, worstGraph, worstDec)
		if worstGraph > 2e-5 || worstDec > 2e-5 {
			t.Errorf("%s: logits differ from transformers' by %.3g (graph) and %.3g (decoder), want <= 2e-5", name, worstGraph, worstDec)
		}
		if scale < 1 {
			t.Errorf("%s: golden logits at most %.3g: too flat to pin anything", name, scale)
		}
	}
}

// TestOpenLlamaHFRejects: configs that would change the architecture and checkpoints that do
// not match their config are one error naming the file.
func TestOpenLlamaHFRejects(t *testing.T) {
	src := filepath.Join("testdata", "llama-tiny-f32")
	cfg, err := os.ReadFile(filepath.Join(src, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(src, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"hidden_act": "silu"`, `"hidden_act": "gelu"`, `hidden_act "gelu"`},
		{`"attention_bias": false`, `"attention_bias": true`, "biases"},
		{`"intermediate_size": 48`, `"intermediate_size": 40`, `tensor "model.layers.0.mlp.down_proj.weight" has shape [32 48], want [32 40]`},
		{`"num_hidden_layers": 2`, `"num_hidden_layers": 3`, `no tensor "model.layers.2.input_layernorm.weight"`},
		{`"num_hidden_layers": 2`, `"num_hidden_layers": 1`, `tensor "model.layers.1.input_layernorm.weight" is not a parameter`},
		{`"rope_type": "default"`, `"rope_type": "llama3"`, `rope_type "llama3"`},
		{`"model_type": "llama"`, `"model_type": "mistral"`, `model_type "mistral"`},
		{`"vocab_size": 64`, `"vocab_size": 1e12`, "config.json"},
		// both spellings of the RoPE base, disagreeing: neither is silently dropped
		{`"rope_parameters": {`, `"rope_theta": 10000.0, "rope_parameters": {`, "rope_theta 10000 and rope_parameters.rope_theta 500000 disagree"},
	} {
		if !strings.Contains(string(cfg), c.from) {
			t.Fatalf("config.json lacks %s", c.from)
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ConfigFile), []byte(strings.Replace(string(cfg), c.from, c.to, 1)), 0o644)
		os.WriteFile(filepath.Join(dir, ModelFile), weights, 0o644)
		_, err := OpenLlamaHF(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s -> %s: %v, want an error naming %s and %q", c.from, c.to, err, dir, c.want)
		}
	}
}
