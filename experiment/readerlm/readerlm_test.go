package readerlm_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/readerlm"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/internal/membudget"
	"github.com/ragtrain/ragtrain/model"
)

// tinyGGUF writes the tiny random LLaMA of testkit.TinyLlamaGGUF (context 64).
func tinyGGUF(t *testing.T, dir string) string { return testkit.TinyLlamaGGUF(t, dir, 64) }

func tinyRecipe(t *testing.T, mode string) *configs.Recipe {
	t.Helper()
	dir := t.TempDir()
	return tinyRecipeFrom(t, dir, mode, tinyGGUF(t, dir))
}

// tinyRecipeFrom is the tiny recipe starting from initFrom (a GGUF file or a directory).
func tinyRecipeFrom(t *testing.T, dir, mode, initFrom string) *configs.Recipe {
	t.Helper()
	text := `kind = "reader_lm"
name = "tiny-` + mode + `"
seed = 7
output_dir = "runs"
[data]
dir = "` + testkit.SciFactDir(t) + `"
train_split = "train"
dev_split = "dev"
[train]
steps = 8
batch_size = 3
lr = 0.05
warmup_steps = 2
log_every = 1
checkpoint_every = 2
[reader_lm]
init_from = "` + initFrom + `"
mode = "` + mode + `"
max_length = 12
eval_batch = 8
[lora]
rank = 2
alpha = 4
dropout = 0.1
targets = ["q_proj", "v_proj", "up_proj", "down_proj"]
`
	return testkit.WriteRecipe(t, dir, "tiny.toml", text)
}

// TestReaderLMResumesExactly: a tiny LLaMA fine-tuned on SciFact claims (LoRA with dropout,
// and full), interrupted after step 5 and resumed, ends with the uninterrupted run's metrics
// (final loss, dev perplexity) and trainable parameters bit for bit, and the same log steps;
// training lowers the dev perplexity; the export reads back.
func TestReaderLMResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	for _, mode := range []string{"lora", "full"} {
		full, resumed, _ := testkit.Resume(t, tinyRecipe(t, mode), "reader_lm", 5)
		testkit.SameMetrics(t, mode+": ", full, resumed, testkit.Untimed)
		if w, g := testkit.LogSteps(t, full), testkit.LogSteps(t, resumed); len(w) != 8 || !slices.Equal(w, g) {
			t.Errorf("%s: log steps resumed %v, uninterrupted %v", mode, g, w)
		}
		a := testkit.SameCheckpoint(t, mode+": ", full, resumed, 8)
		mt, err := experiment.ReadMetrics(full)
		if err != nil {
			t.Fatal(err)
		}
		if !(mt["reader_lm/dev_perplexity_after"] < mt["reader_lm/dev_perplexity_before"]) {
			t.Errorf("%s: dev perplexity %v -> %v, want lower", mode, mt["reader_lm/dev_perplexity_before"], mt["reader_lm/dev_perplexity_after"])
		}
		// The export holds the fine-tuned weights: the merged model (LoRA) or the parameters.
		hf := filepath.Join(t.TempDir(), "hf")
		if err := export.Export(full, hf, export.Options{}); err != nil {
			t.Fatal(err)
		}
		back, err := export.OpenLlamaHF(hf)
		if err != nil {
			t.Fatal(err)
		}
		m, _, _, err := export.OpenReaderLM(a)
		if err != nil {
			t.Fatal(err)
		}
		merged, err := m.MergeLoRA()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range merged.Params() {
			w, g := p.Value.Data().([]float32), back.Param(p.Name).Value.Data().([]float32)
			for j := range w {
				if math.Float32bits(w[j]) != math.Float32bits(g[j]) {
					t.Fatalf("%s: exported %s[%d] = %v, want %v", mode, p.Name, j, g[j], w[j])
				}
			}
		}
		if mode == "lora" {
			if err := export.Export(full, filepath.Join(t.TempDir(), "peft"), export.Options{Adapter: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReaderLMMemoryRefused: under a cgroup memory.max of 64 KiB the tiny LLaMA's run is refused
// before any weight is read, in one line naming the recipe keys behind the estimate, and leaves
// no run directory; the estimate is model.EstimateLlamaTraining at max(batch, eval_batch)
// sequences of max_length.
func TestReaderLMMemoryRefused(t *testing.T) {
	rec := tinyRecipe(t, "lora")
	e, keys, err := readerlm.Memory(rec)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(readerlm.Of(rec).InitFrom)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LlamaConfigGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	lc := model.LoRAConfig{Rank: 2, Alpha: 4, Dropout: 0.1, Targets: []string{"q_proj", "v_proj", "up_proj", "down_proj"}} // tinyRecipe's [lora]
	if want := model.EstimateLlamaTraining(cfg, &lc, 8*12, 12); e != want {
		t.Errorf("Memory = %+v, want %+v", e, want)
	}
	dir := t.TempDir()
	oldMax, oldInfo := membudget.CgroupMax, membudget.MemInfo
	t.Cleanup(func() { membudget.CgroupMax, membudget.MemInfo = oldMax, oldInfo })
	membudget.CgroupMax, membudget.MemInfo = filepath.Join(dir, "memory.max"), filepath.Join(dir, "meminfo")
	if err := os.WriteFile(membudget.CgroupMax, []byte("65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(membudget.MemInfo, []byte("MemAvailable: 128 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec.OutputDir = filepath.Join(dir, "runs")
	_, err = experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), keys) ||
		!strings.Contains(err.Error(), "lora.rank = 2") || !strings.Contains(err.Error(), "reader_lm.max_length = 12") {
		t.Errorf("err = %v", err)
	}
	if entries, _ := os.ReadDir(rec.OutputDir); len(entries) > 0 {
		t.Errorf("%s holds %d entries (%s first); err = %v", rec.OutputDir, len(entries), entries[0].Name(), err)
	}
}

// TestReaderLMFromHFDirectory: reader_lm.init_from may name a Hugging Face LlamaForCausalLM
// directory. The tiny GGUF's export (export.WriteLlamaHF: float32 weights, tokenizer.json)
// trains to the GGUF run's metrics and parameters bit for bit, in full and LoRA; and the tiny
// bfloat16 checkpoint transformers saved (export/testdata/llama-tiny-bf16, untied head) with a
// 64-token byte-level tokenizer written here fine-tunes, lowering its dev perplexity, and its
// run reopens from the directory (export.OpenReaderLM) with the trained weights.
func TestReaderLMFromHFDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	for _, mode := range []string{"lora", "full"} {
		dir := t.TempDir()
		gg := tinyGGUF(t, dir)
		hf := filepath.Join(dir, "hf")
		if _, err := export.ExportLlamaGGUF(gg, hf); err != nil {
			t.Fatal(err)
		}
		a, err := experiment.Run(context.Background(), tinyRecipeFrom(t, filepath.Join(dir, "a"), mode, gg), experiment.Options{Out: io.Discard, Progress: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		b, err := experiment.Run(context.Background(), tinyRecipeFrom(t, filepath.Join(dir, "b"), mode, hf), experiment.Options{Out: io.Discard, Progress: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		where := mode + " (GGUF vs HF directory, \"resumed\" = from the HF directory): "
		testkit.SameMetrics(t, where, a, b, testkit.Untimed)
		testkit.SameCheckpoint(t, where, a, b, 8)
	}

	// transformers' own bfloat16 save, with a tokenizer of 64 byte-level tokens.
	dir := t.TempDir()
	hf := filepath.Join(dir, "bf16")
	if err := os.MkdirAll(hf, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "export", "testdata", "llama-tiny-bf16", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hf, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTinyHFTokenizer(t, hf, 64)
	rec := tinyRecipeFrom(t, dir, "full", hf)
	run, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := experiment.ReadMetrics(run)
	if err != nil {
		t.Fatal(err)
	}
	before, after := mt["reader_lm/dev_perplexity_before"], mt["reader_lm/dev_perplexity_after"]
	t.Logf("bf16 fixture: dev perplexity %.4f -> %.4f", before, after)
	if !(after < before) || math.IsInf(before, 0) || math.IsNaN(before) {
		t.Errorf("bf16 fixture: dev perplexity %v -> %v, want finite and lower", before, after)
	}
	ck, err := checkpoints.Load(run)
	if err != nil {
		t.Fatal(err)
	}
	m, _, c, err := export.OpenReaderLM(ck)
	if err != nil {
		t.Fatal(err)
	}
	base, err := export.OpenLlamaHF(hf)
	if err != nil {
		t.Fatal(err)
	}
	if c.InitFrom != hf || m.Cfg != base.Cfg || m.Cfg.TieEmbeddings {
		t.Fatalf("init_from %s, config %+v, want %s, %+v", c.InitFrom, m.Cfg, hf, base.Cfg)
	}
	moved := 0
	for _, p := range m.Params() {
		w, g := base.Param(p.Name).Value.Data().([]float32), p.Value.Data().([]float32)
		for j := range w {
			if w[j] != g[j] {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Error("the reopened run has the base weights: training moved nothing")
	}
}

// writeTinyHFTokenizer writes a byte-level BPE tokenizer of V tokens into dir: three control
// tokens (<|endoftext|>, <|im_start|> = bos, <|im_end|> = eos) and the byte-alphabet characters
// of space, the lowercase letters and then the first others of GPT-2's alphabet, no merges.
func writeTinyHFTokenizer(t *testing.T, dir string, V int) {
	t.Helper()
	toks := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "Ġ"}
	for c := 'a'; c <= 'z'; c++ {
		toks = append(toks, string(c))
	}
	for c := '!'; len(toks) < V; c++ {
		if c < 'a' || c > 'z' {
			toks = append(toks, string(c))
		}
	}
	vocab := map[string]int{}
	added := []map[string]any{}
	for i, s := range toks {
		vocab[s] = i
		if i < 3 {
			added = append(added, map[string]any{"id": i, "content": s, "special": true})
		}
	}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	writeJSON(t, filepath.Join(dir, "tokenizer.json"), map[string]any{"version": "1.0", "added_tokens": added,
		"normalizer": nil, "pre_tokenizer": bl, "post_processor": nil, "decoder": bl,
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}}})
	writeJSON(t, filepath.Join(dir, "tokenizer_config.json"), map[string]any{"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": false})
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReaderLMCheckpointingSameRun: reader_lm.gradient_checkpointing changes memory only: a
// tiny LLaMA's run with it ends with the plain run's metrics, logged losses and trainable
// tensors bit for bit (LoRA with dropout in one pass; full fine-tuning in micro-batches of 2,
// tied embeddings), and the memory estimate it is checked against is the checkpointed one.
func TestReaderLMCheckpointingSameRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	for _, c := range []struct {
		mode  string
		micro int
	}{{"lora", 0}, {"full", 2}} {
		run := func(ckpt bool) string {
			rec := tinyRecipe(t, c.mode)
			rec.Train.Steps = 4
			readerlm.Of(rec).MicroBatch = c.micro
			readerlm.Of(rec).GradientCheckpointing = ckpt
			dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
			if err != nil {
				t.Fatalf("%s checkpointing=%t: %v", c.mode, ckpt, err)
			}
			return dir
		}
		plain, ckpt := run(false), run(true)
		testkit.SameMetrics(t, c.mode+" checkpointed: ", plain, ckpt, testkit.Untimed)
		lp, lc := logRecords(t, plain), logRecords(t, ckpt)
		if len(lp) != 4 || len(lp) != len(lc) {
			t.Fatalf("%s: %d log lines plain, %d checkpointed", c.mode, len(lp), len(lc))
		}
		for i := range lp {
			for _, k := range []string{"step", "loss", "grad_norm", "lr"} {
				if lp[i][k] == nil || lp[i][k] != lc[i][k] {
					t.Errorf("%s: log line %d: %s %v checkpointed, %v plain", c.mode, i, k, lc[i][k], lp[i][k])
				}
			}
		}
		testkit.SameCheckpoint(t, c.mode+" (\"resumed\" = checkpointed): ", plain, ckpt, 4)
	}
	rec := tinyRecipe(t, "full")
	readerlm.Of(rec).GradientCheckpointing = true
	e, keys, err := readerlm.Memory(rec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := export.LlamaConfigOf(readerlm.Of(rec).InitFrom)
	if err != nil {
		t.Fatal(err)
	}
	if want := model.EstimateLlamaTrainingCheckpointed(cfg, nil, 8*12, 12); e != want || !strings.Contains(keys, "gradient_checkpointing = true") {
		t.Errorf("Memory = %+v (%s), want %+v", e, keys, want)
	}
	if plain := model.EstimateLlamaTraining(cfg, nil, 8*12, 12); !(e.Activations < plain.Activations) {
		t.Errorf("checkpointed activations %d, plain %d", e.Activations, plain.Activations)
	}
}

// logRecords reads the run directory's log.jsonl, one map per line.
func logRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, m)
	}
	return out
}
