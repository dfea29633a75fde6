package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// byteAlphabet is GPT-2's bytes_to_unicode: the 256 characters byte-level BPE spells bytes in.
func byteAlphabet() []string {
	var out []string
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		out = append(out, string(r))
	}
	return out
}

// tinyGGUF writes a random 2-layer LLaMA with a byte-level tokenizer (3 control tokens, the 256
// bytes, no merges; eos <|im_end|> = 2) and a context of 64 tokens.
func tinyGGUF(t *testing.T) (string, *model.Llama) {
	t.Helper()
	toks := append([]string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, byteAlphabet()...)
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = 1
		if i < 3 {
			types[i] = 3
		}
	}
	cfg := model.LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: len(toks), RopeTheta: 10000,
		RMSEps: 1e-5, MaxPosition: 64, TieEmbeddings: true}
	m, err := model.NewLlama(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() { // sharper distributions than the 0.02 initialisation
		if p.Value.Dims() == 2 {
			d := p.Value.Data().([]float32)
			for i := range d {
				d[i] *= 50
			}
		}
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	meta := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.tokens", Value: toks},
		{Key: "tokenizer.ggml.merges", Value: []string{}},
		{Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
	}
	if err := model.WriteLlamaGGUF(path, m, meta); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = model.LoadLlamaGGUF(f); err != nil { // the model as the command reads it
		t.Fatal(err)
	}
	return path, m
}

type generated struct {
	Prompt, Text string
	Tokens       []int
}

func runGenerateOut(t *testing.T, args ...string) ([]generated, error) {
	t.Helper()
	var a generateArgs
	fs := generateFlags(&a)
	if err := parse(fs, args); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := generate(a, &out); err != nil {
		return nil, err
	}
	var res []generated
	dec := json.NewDecoder(&out)
	for dec.More() {
		var g generated
		if err := dec.Decode(&g); err != nil {
			t.Fatal(err)
		}
		res = append(res, g)
	}
	return res, nil
}

// TestGenerateSubcommand: `train generate` prints, per prompt, the greedy continuation that
// model.LlamaDecoder computes on the tokenizer's ids (with -chat, of the chat prompt), the stop
// token left out and the text decoded; sampling repeats per seed; prompts too long for the
// context and bad prompt lines are one error naming file:line.
func TestGenerateSubcommand(t *testing.T) {
	path, m := tinyGGUF(t)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "p.jsonl")
	texts := []string{"hello world", "Zürich \U0001F600", "a"}
	var lines []string
	for _, s := range texts {
		b, _ := json.Marshal(map[string]string{"prompt": s, "id": "ignored"})
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(prompts, []byte(strings.Join(lines, "\n\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := ggufTokenizer(t, path)
	d, _ := model.NewLlamaDecoder(m)
	for _, chat := range []bool{false, true} {
		args := []string{"-model", path, "-prompts", prompts, "-max-new-tokens", "12"}
		if chat {
			args = append(args, "-chat")
		}
		got, err := runGenerateOut(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(texts) {
			t.Fatalf("chat=%t: %d outputs, want %d", chat, len(got), len(texts))
		}
		for i, g := range got {
			text := texts[i]
			if chat {
				text = tok.ChatPrompt(text)
			}
			want, err := d.Generate([][]int{tok.Encode(text)}, model.SampleOptions{MaxNew: 12, Stop: []int{2}})
			if err != nil {
				t.Fatal(err)
			}
			if g.Prompt != texts[i] || !slices.Equal(g.Tokens, append([]int{}, want[0].Tokens...)) || g.Text != tok.Decode(g.Tokens, true) {
				t.Errorf("chat=%t prompt %d: %+v, want tokens %v", chat, i, g, want[0].Tokens)
			}
			if slices.Contains(g.Tokens, 2) {
				t.Errorf("chat=%t prompt %d: tokens %v hold the stop id", chat, i, g.Tokens)
			}
		}
	}
	sample := []string{"-model", path, "-prompts", prompts, "-max-new-tokens", "12", "-temperature", "1.5", "-top-p", "0.95", "-seed", "4"}
	a, err := runGenerateOut(t, sample...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runGenerateOut(t, append(sample, "-batch", "1")...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(a, b, func(x, y generated) bool { return slices.Equal(x.Tokens, y.Tokens) }) {
		t.Errorf("seed 4 sampled %v, then with -batch 1 %v", a, b)
	}

	if _, err := runGenerateOut(t, "-model", path, "-prompts", prompts, "-max-new-tokens", "54"); err == nil ||
		!strings.Contains(err.Error(), prompts+":1: the prompt has 11 tokens; with -max-new-tokens 54 that is 65, beyond the model's context of 64 tokens") {
		t.Errorf("too long: %v", err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\": \"x\"}\n{\"prompt\": 3}\n"), 0o644)
	if _, err := runGenerateOut(t, "-model", path, "-prompts", bad); err == nil || !strings.Contains(err.Error(), bad+":2:") {
		t.Errorf("bad line: %v", err)
	}
	if _, err := runGenerateOut(t, "-model", dir, "-prompts", prompts); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("a directory that is no model: %v", err)
	}
}

// ggufTokenizer is the tokenizer of the GGUF file at path.
func ggufTokenizer(t *testing.T, path string) *tokenize.GGUFTokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadGGUFTokenizer(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGeneratePrecision: -precision bf16 decodes as the decoder does with bfloat16 products (and
// the process's products are float32 again after it); another value is refused before anything
// is read.
func TestGeneratePrecision(t *testing.T) {
	path, m := tinyGGUF(t)
	prompts := filepath.Join(t.TempDir(), "p.jsonl")
	if err := os.WriteFile(prompts, []byte(`{"prompt": "hello world"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := ggufTokenizer(t, path)
	d, _ := model.NewLlamaDecoder(m)
	old := model.SetMatmulPrecision(model.BFloat16)
	want, err := d.Generate([][]int{tok.Encode("hello world")}, model.SampleOptions{MaxNew: 12, Stop: []int{2}})
	model.SetMatmulPrecision(old)
	if err != nil {
		t.Fatal(err)
	}
	f32, err := d.Generate([][]int{tok.Encode("hello world")}, model.SampleOptions{MaxNew: 12, Stop: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(want[0].Tokens, f32[0].Tokens) { // else an ignored flag would pass
		t.Fatalf("the tiny model decodes %v in both precisions", f32[0].Tokens)
	}
	got, err := runGenerateOut(t, "-model", path, "-prompts", prompts, "-max-new-tokens", "12", "-precision", "bf16")
	if err != nil || len(got) != 1 || !slices.Equal(got[0].Tokens, append([]int{}, want[0].Tokens...)) {
		t.Fatalf("-precision bf16: %+v, %v; want tokens %v", got, err, want[0].Tokens)
	}
	if model.MatmulPrecision() != model.Float32 {
		t.Fatal("generate left the products in bf16")
	}
	if _, err := runGenerateOut(t, "-model", "no-such.gguf", "-prompts", "no-such.jsonl", "-precision", "fp16"); err == nil ||
		!strings.Contains(err.Error(), `-precision: precision "fp16"`) {
		t.Errorf("-precision fp16: %v", err)
	}
}

// TestGenerateUsage: generate's flags appear in the help; missing flags exit 1.
func TestGenerateUsage(t *testing.T) {
	out, _, code := runChild(t, "generate", "-h")
	if code != 0 || !strings.Contains(out, "train generate -model M -prompts FILE") || !strings.Contains(out, "-top-p") {
		t.Errorf("generate -h: exit %d, %q", code, out)
	}
	_, errOut, code := runChild(t, "generate", "-model", "x")
	if code != 1 || !strings.Contains(errOut, "-model and -prompts are required") {
		t.Errorf("generate without -prompts: exit %d, %q", code, errOut)
	}
	// a temperature that is not a finite number is refused before any model is read (Inf
	// once sampled uniformly at random with exit 0; NaN failed only after loading the model)
	for _, temp := range []string{"NaN", "Inf", "-1"} {
		err := runGenerate([]string{"-model", "no-such.gguf", "-prompts", "no-such.jsonl", "-temperature", temp})
		if err == nil || !strings.Contains(err.Error(), "-temperature") {
			t.Errorf("-temperature %s: %v", temp, err)
		}
	}
}

// TestGenerateFromDirectories: -model may be the GGUF's Hugging Face export (the same
// generations as the GGUF), a reader_lm run directory (its latest checkpoint's LoRA merged:
// model.LlamaDecoder on Llama.MergeLoRA's weights; when that checkpoint is damaged, the newest
// intact one) or a checkpoint directory.
func TestGenerateFromDirectories(t *testing.T) {
	path, m := tinyGGUF(t)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "p.jsonl")
	if err := os.WriteFile(prompts, []byte(`{"prompt": "hello world"}`+"\n"+`{"prompt": "a b c"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := func(gs []generated) [][]int {
		var out [][]int
		for _, g := range gs {
			out = append(out, g.Tokens)
		}
		return out
	}
	gen := func(model string, chat bool) [][]int {
		t.Helper()
		args := []string{"-model", model, "-prompts", prompts, "-max-new-tokens", "10"}
		if chat {
			args = append(args, "-chat")
		}
		g, err := runGenerateOut(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		return tokens(g)
	}
	tok := ggufTokenizer(t, path)
	// what the decoder generates with model w
	want := func(w *model.Llama, chat bool) [][]int {
		t.Helper()
		d, err := model.NewLlamaDecoder(w)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]int
		for _, s := range []string{"hello world", "a b c"} {
			if chat {
				s = tok.ChatPrompt(s)
			}
			g, err := d.Generate([][]int{tok.Encode(s)}, model.SampleOptions{MaxNew: 10, Stop: []int{2}})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, append([]int{}, g[0].Tokens...))
		}
		return out
	}
	base := want(m, false)
	if g := gen(path, false); !equalTokens(g, base) {
		t.Fatalf("GGUF: %v, want %v", g, base)
	}
	hf := filepath.Join(dir, "hf")
	if _, err := export.ExportLlamaGGUF(path, hf); err != nil {
		t.Fatal(err)
	}
	for _, chat := range []bool{false, true} {
		if g, w := gen(hf, chat), want(m, chat); !equalTokens(g, w) {
			t.Errorf("exported directory, chat=%t: %v, want the GGUF's %v", chat, g, w)
		}
	}

	// A run directory with two LoRA checkpoints (adapters B random, so that they change the model).
	lc := model.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj", "down_proj"}}
	run := filepath.Join(dir, "run")
	merged := map[int]*model.Llama{}
	for step := 2; step <= 4; step += 2 {
		l, err := model.NewLlamaLoRA(m, lc, uint64(step))
		if err != nil {
			t.Fatal(err)
		}
		var ts []checkpoints.Tensor
		for i, p := range l.Params() {
			d := p.Value.Data().([]float32)
			for j := range d {
				if strings.Contains(p.Name, "lora_B") {
					d[j] = float32(math.Sin(float64(step*1000+i*37+j))) * 2
				}
			}
			ts = append(ts, checkpoints.Tensor{Name: p.Name, Shape: append([]int{}, p.Value.Shape()...), Data: d})
		}
		m.AttachLoRA(l)
		if merged[step], err = m.MergeLoRA(); err != nil {
			t.Fatal(err)
		}
		m.AttachLoRA(nil)
		err = checkpoints.Save(run, &checkpoints.Checkpoint{Params: ts, Trainer: checkpoints.TrainerState{Phase: "reader_lm", Step: step},
			Config: export.ReaderLMConfig{Kind: export.KindReaderLM, InitFrom: path, Llama: m.Cfg, LoRA: &lc}})
		if err != nil {
			t.Fatal(err)
		}
	}
	w4, w2 := want(merged[4], false), want(merged[2], false)
	if equalTokens(w4, base) || equalTokens(w2, w4) {
		t.Fatalf("the adapters change nothing: base %v, step 2 %v, step 4 %v", base, w2, w4)
	}
	if g := gen(run, false); !equalTokens(g, w4) {
		t.Errorf("run directory: %v, want step 4 merged %v", g, w4)
	}
	ck2 := filepath.Join(run, "checkpoint-reader_lm-2")
	if g := gen(ck2, false); !equalTokens(g, w2) {
		t.Errorf("checkpoint directory %s: %v, want %v", ck2, g, w2)
	}
	// damage the latest checkpoint: the newest intact one (step 2) generates
	st := filepath.Join(run, "checkpoint-reader_lm-4", checkpoints.ModelFile)
	b, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(st, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if g := gen(run, false); !equalTokens(g, w2) {
		t.Errorf("run directory with its latest damaged: %v, want step 2's %v", g, w2)
	}
}

func equalTokens(a, b [][]int) bool {
	return slices.EqualFunc(a, b, func(x, y []int) bool { return slices.Equal(x, y) })
}
