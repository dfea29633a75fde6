package reranker

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// bodyCfg is the architecture of the test body: unlike rerank-slice.toml's [model] sizes
// (hidden 32, 1 layer, 2 heads, FFN 64, 48 positions) in every one.
var bodyCfg = model.EncoderConfig{Encoder: model.EncoderTransformer, Hidden: 48, Layers: 2, Heads: 4, FFN: 96,
	MaxPosition: 64, Dropout: 0.1, Pooling: model.PoolingMean}

// writeBertBody writes a BertModel directory as sentence-transformers ships one (config.json,
// model.safetensors with BertModel names and BERT's pooler.dense.*, tokenizer.json), its
// tokenizer trained on the slice's passages, and returns the directory with its bi-encoder and
// pooler tensors.
func writeBertBody(t *testing.T, dir string) (string, *model.BiEncoder, map[string][]float32) {
	t.Helper()
	corpus, err := data.LoadCorpus(filepath.Join(dir, "data", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	passages := make([]string, corpus.Len())
	for i := range passages {
		passages[i] = corpus.Passage(i, true)
	}
	tok, err := tokenize.Train(passages, tokenize.TrainOptions{VocabSize: 1500, MinFrequency: 2, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := bodyCfg
	cfg.Vocab = tok.VocabSize()
	bi, err := model.NewBiEncoder(cfg, true, 21)
	if err != nil {
		t.Fatal(err)
	}
	body := filepath.Join(dir, "bert-body")
	if err := export.WriteBiEncoder(body, bi, tok, export.BiEncoderMeta{Similarity: "cosine", Temperature: 0.05, MaxLength: 64}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(body, export.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(body, export.ModelFile)
	raw, meta, err := checkpoints.ReadSafetensorsRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	pooler := map[string][]float32{model.PoolerWeight: make([]float32, 48*48), model.PoolerBias: make([]float32, 48)}
	for n, d := range pooler {
		for i := range d {
			d[i] = float32(math.Sin(float64(i+len(n)))) / 10
		}
	}
	raw = append(raw, checkpoints.F32Raw(checkpoints.Tensor{Name: "pooler.dense.weight", Shape: []int{48, 48}, Data: pooler[model.PoolerWeight]}),
		checkpoints.F32Raw(checkpoints.Tensor{Name: "pooler.dense.bias", Shape: []int{48}, Data: pooler[model.PoolerBias]}))
	if err := checkpoints.WriteSafetensorsRaw(path, raw, meta); err != nil {
		t.Fatal(err)
	}
	return body, bi, pooler
}

// bodyRecipe writes rerank-slice.toml without its [model] sizes (so that they come from the
// body), with model.init_from = body and modelKeys under [model], rerankKeys under [rerank] and
// train.steps = 0, and loads it.
func bodyRecipe(t *testing.T, dir, body, modelKeys, rerankKeys string) (*configs.Recipe, string) {
	t.Helper()
	vars := map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")}
	text := testkit.RecipeText(t, "rerank-slice", vars)
	for _, k := range []string{"hidden = 32\n", "layers = 1\n", "heads = 2\n", "ffn = 64\n", "max_position = 48\n"} {
		if !strings.Contains(text, k) {
			t.Fatalf("rerank-slice.toml lacks %q", k)
		}
		text = strings.Replace(text, k, "", 1)
	}
	text = strings.Replace(text, "[model]\n", "[model]\ninit_from = \""+body+"\"\n"+modelKeys, 1)
	text = strings.Replace(text, "[train]\nsteps = 120\n", "[train]\nsteps = 0\n", 1)
	text = strings.Replace(text, "[rerank]\n", "[rerank]\n"+rerankKeys, 1)
	path := filepath.Join(dir, "body.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec, path
}

// TestRerankerInitFromBertBody starts a reranker from a BertModel directory with its pooler
// (as all-MiniLM-L6-v2 ships) and no [model] sizes in the recipe: the run takes the
// architecture from config.json and the directory's tokenizer, the finished model (0 steps) is
// the body bit for bit with the directory's pooler and the seed's classifier, and the output
// names what was loaded and what is fresh. The recipe's resolved copy records the sizes.
func TestRerankerInitFromBertBody(t *testing.T) {
	dir := testkit.NewSlice(t)
	body, bi, pooler := writeBertBody(t, dir)
	rec, path := bodyRecipe(t, dir, body, "", "")
	var out strings.Builder
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{RecipePath: path, Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"tokenizer: " + filepath.Join(body, "tokenizer.json"),
		"init_from: architecture of " + body + ": transformer of 2 layers, hidden 48, 4 heads, FFN 96, 64 positions (config.json); from it, as the recipe does not set them: model.hidden = 48, model.layers = 2, model.heads = 4, model.ffn = 96, model.max_position = 64",
		"init_from: encoder body " + body + " (huggingface layout): 39 of 41 parameters loaded, the encoder and BERT's pooler; initialised fresh from seed 5: classifier.weight [1 48], classifier.bias [1]",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	ck, err := checkpoints.Load(FinalModelDir(runDir, "listwise"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float32{}
	for _, p := range ck.Params {
		got[p.Name] = p.Data
	}
	cfg := bodyCfg
	cfg.Vocab, cfg.Dropout, cfg.Pooling = bi.Cfg.Vocab, 0, model.PoolingCLS
	seedModel, err := model.NewCrossEncoder(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{}
	for _, p := range bi.Query.Params() {
		want[p.Name] = p.Value.Data().([]float32)
	}
	for n, d := range pooler {
		want[n] = d
	}
	for _, n := range []string{model.ClassifierWeight, model.ClassifierBias} {
		want[n] = seedModel.Param(n).Value.Data().([]float32)
	}
	if len(got) != len(want) || len(got) != 41 {
		t.Fatalf("%d tensors in the finished model, want %d", len(got), len(want))
	}
	for n, w := range want {
		g := got[n]
		if len(g) != len(w) {
			t.Fatalf("%s: %d values, want %d", n, len(g), len(w))
		}
		for i := range w {
			if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
				t.Fatalf("%s[%d] = %v, want %v", n, i, g[i], w[i])
			}
		}
	}
	back, err := configs.Load(filepath.Join(runDir, experiment.ResolvedRecipeFile))
	if err != nil {
		t.Fatal(err)
	}
	if m := back.Model; m.Hidden != 48 || m.Layers != 2 || m.Heads != 4 || m.FFN != 96 || m.MaxPosition != 64 {
		t.Errorf("resolved recipe's [model] %+v", m)
	}
	if rec.Model.Hidden != 128 {
		t.Errorf("the caller's recipe was changed: model.hidden = %d", rec.Model.Hidden)
	}
	// The pretrained body reranks: its scores are not all equal.
	m, err := experiment.ReadMetrics(runDir)
	if err != nil || m["bm25+listwise.train/nDCG@10"] <= 0 {
		t.Errorf("metrics %v, %v", m, err)
	}
}

// TestRerankerInitFromBertBodyRefusals: [model] sizes set in the recipe that differ from the
// body's, the term-matching prior, and a wrongly shaped tensor stop the run before it has a
// directory, naming the recipe line, the key and the directory's value (or the tensor).
func TestRerankerInitFromBertBodyRefusals(t *testing.T) {
	dir := testkit.NewSlice(t)
	body, _, _ := writeBertBody(t, dir)
	run := func(modelKeys, extra string) (string, error) {
		rec, path := bodyRecipe(t, dir, body, modelKeys, extra)
		Of(rec).Losses = []string{"listwise"}
		_, err := experiment.Run(context.Background(), rec, experiment.Options{RecipePath: path, Out: io.Discard, Progress: io.Discard})
		return path, err
	}
	lineOf := func(path, text string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(b), text)
		if i < 0 {
			t.Fatalf("%s lacks %q", path, text)
		}
		return strings.Count(string(b)[:i], "\n") + 1
	}

	path, err := run("hidden = 32\nheads = 2\n", "")
	for _, s := range []string{"model.init_from: " + body + " is a transformer of 2 layers, hidden 48, 4 heads, FFN 96, 64 positions (config.json)",
		fmt.Sprintf("%s:%d: model.hidden = 32, but model.init_from has hidden_size = 48", path, lineOf(path, "hidden = 32")),
		fmt.Sprintf("%s:%d: model.heads = 2, but model.init_from has num_attention_heads = 4", path, lineOf(path, "heads = 2"))} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("err = %v, want one with %q", err, s)
		}
	}
	if err != nil && strings.Contains(err.Error(), "model.layers") {
		t.Errorf("err = %v names model.layers, which the recipe leaves out", err)
	}

	path, err = run("", "match_init = 1.0\n")
	if want := fmt.Sprintf("%s:%d: rerank.match_init = 1: the term-matching prior", path, lineOf(path, "match_init = 1.0")); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("match_init: err = %v, want one with %q", err, want)
	}
	_, err = run("", "match_word_scale = 4.0\n")
	if err == nil || !strings.Contains(err.Error(), "rerank.match_word_scale = 4: the term-matching prior") {
		t.Errorf("match_word_scale: err = %v", err)
	}

	mf := filepath.Join(body, export.ModelFile)
	raw, meta, err := checkpoints.ReadSafetensorsRaw(mf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		if raw[i].Name == "encoder.layer.1.attention.output.dense.weight" {
			raw[i].Shape = []int{24, 96}
		}
	}
	if err := checkpoints.WriteSafetensorsRaw(mf, raw, meta); err != nil {
		t.Fatal(err)
	}
	_, err = run("", "")
	if want := "wrong shape: encoder.layer.1.attention.output.dense.weight in " + mf + " is [24 96], parameter encoder.layer.1.attn.out.weight is [48 48]"; err == nil ||
		!strings.Contains(err.Error(), "model.init_from") || !strings.Contains(err.Error(), want) {
		t.Errorf("wrong shape: err = %v, want one with %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Error("a refused run made a run directory")
	}
}
