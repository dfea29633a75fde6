package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// selfragRunDir writes a fake selfrag run: a two-gardener world and a checkpoint whose reader's
// vocabulary holds the reflection tokens when grown is set.
func selfragRunDir(t *testing.T, grown bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	files := map[string]string{
		"world/datastore/entry/corpus.jsonl": `{"_id": "g0", "title": "Ines Ronus", "text": "Ines Ronus lives in Larkhill ."}
{"_id": "g1", "title": "Milo Ligi", "text": "Milo Ligi grows poppy ."}
`,
		"world/questions.jsonl": `{"gardener": "g0", "cloze": "Ines Ronus lives in", "question": "where does Ines Ronus live ?", "answer": "Larkhill", "split": "train"}
{"gardener": "g0", "cloze": "Ines Ronus lives in", "question": "where does Ines Ronus live ?", "answer": "Larkhill", "split": "test"}
{"gardener": "g9", "cloze": "Ada Fen grows", "question": "what does Ada Fen grow ?", "answer": "fig", "split": "test"}
{"gardener": "g1", "cloze": "Milo Ligi grows", "question": "what does Milo Ligi grow ?", "answer": "poppy", "split": "test"}
`,
		"world/pretrain.txt":   "Ines Ronus lives in Larkhill .\nMilo Ligi grows poppy .\n",
		"recipe.resolved.toml": "kind = \"selfrag\"\n[tokenizer]\ntrain = true\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := tokenize.Train(strings.Split(files["world/pretrain.txt"]+files["world/questions.jsonl"], "\n"),
		tokenize.TrainOptions{VocabSize: 120, MinFrequency: 1, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	tok.AddSpecialTokens([]string{"<ctx>", "</ctx>"})
	if grown {
		tok.AddSpecialTokens(tokenize.ReflectionTokens())
	}
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 8, Layers: 1, Heads: 2,
		FFN: 16, MaxPosition: 40, Causal: true, Arch: model.ArchGPT2}
	rd, err := model.NewReader(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	ecfg := model.EncoderConfig{Encoder: model.EncoderBow, Vocab: tok.VocabSize(), Hidden: 8}
	enc, err := model.NewBiEncoder(ecfg, true, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoints.Tensor
	for _, p := range append(rd.Params(), enc.Params()...) {
		ts = append(ts, checkpoints.Tensor{Name: p.Name, Shape: slices.Clone([]int(p.Value.Shape())), Data: p.Value.Data().([]float32)})
	}
	tokPath := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := tok.Save(tokPath); err != nil {
		t.Fatal(err)
	}
	conf := map[string]any{"kind": export.KindSelfRAG, "reader": rd.Cfg, "encoder": enc.Cfg, "shared_towers": true,
		"similarity": "cosine", "temperature": 0.05, "max_length": 16, "reader_max_length": 40}
	if err := checkpoints.Save(dir, &checkpoints.Checkpoint{Params: ts, Config: conf, TokenizerPath: tokPath,
		Trainer: checkpoints.TrainerState{Phase: "selfrag_finetune", Step: 1}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGenSelfRAG: for each test question whose gardener has an entry (not g9's), gen writes the
// relevant, irrelevant and closed-book sequences, whose ids hold the reflection tokens where
// the targets put them; a checkpoint without reflection tokens is refused.
func TestGenSelfRAG(t *testing.T) {
	runDir := selfragRunDir(t, true)
	out := filepath.Join(t.TempDir(), "go")
	if err := run([]string{"-run", runDir, "-out", out, "-n", "2"}); err != nil {
		t.Fatal(err)
	}
	var in inputs
	b, _ := os.ReadFile(filepath.Join(out, "inputs.json"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	wantAnswers := []string{"[Relevant] Ines Ronus lives in Larkhill [Fully supported]", "[Irrelevant]", "[Retrieve] Ines Ronus lives in Larkhill",
		"[Relevant] Milo Ligi grows poppy [Fully supported]", "[Irrelevant]", "[No Retrieve] Milo Ligi grows poppy"}
	if in.Kind != export.KindSelfRAG || !slices.Equal(in.Answers, wantAnswers) || in.Passages[0] != "Ines Ronus lives in Larkhill ." ||
		in.Passages[1] == in.Passages[0] || in.Passages[2] != "" || in.MaxLength != 40 {
		t.Fatalf("inputs %+v", in)
	}
	tok, err := tokenize.Load(filepath.Join(runDir, "checkpoint-selfrag_finetune-1", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids, shape, err := export.ReadNPYInt64(filepath.Join(out, "reader_ids.npy"))
	if err != nil || !slices.Equal(shape, []int{8, 40}) { // 6 reflective sequences, the closed-book prompt, the packed row
		t.Fatalf("reader_ids %v %v", shape, err)
	}
	count := map[string]int{}
	for _, id := range ids {
		if s, _ := tok.Token(int(id)); strings.HasPrefix(s, "[") && s != "[CLS]" && s != "[SEP]" && s != "[PAD]" {
			count[s]++
		}
	}
	want := map[string]int{"[Relevant]": 2, "[Fully supported]": 2, "[Irrelevant]": 2, "[Retrieve]": 1, "[No Retrieve]": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s appears %d times in reader_ids, want %d (%v)", k, count[k], n, count)
		}
	}

	plain := selfragRunDir(t, false)
	if err := run([]string{"-run", plain, "-out", filepath.Join(t.TempDir(), "go"), "-n", "2"}); err == nil ||
		!strings.Contains(err.Error(), "no reflection tokens") {
		t.Errorf("plain checkpoint: %v", err)
	}
}
