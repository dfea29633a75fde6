package colbert

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/tokenize"
)

// sliceTokenizer writes a BERT WordPiece tokenizer.json over the slice's words, with the markers
// and the punctuation, to dir.
func sliceTokenizer(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "data", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := os.ReadFile(filepath.Join(dir, "data", "queries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	vocab := []string{"[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for _, c := range cb.Punctuation {
		vocab = append(vocab, string(c))
	}
	seen := map[string]bool{}
	for _, w := range regexp.MustCompile(`[a-z]+`).FindAllString(strings.ToLower(string(b)+string(q)), -1) {
		if !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	tok, err := tokenize.FromVocab(vocab, tokenize.DefaultVocabOptions())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := tok.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyRecipe is a colbert recipe over a 200-passage Cranfield slice with a 1-layer encoder;
// samplerKeys go into its [sampler] table; edits are pairs (old, new) of its text replaced.
func tinyRecipe(t *testing.T, loss, samplerKeys string, edits ...string) *configs.Recipe {
	t.Helper()
	dir := testkit.NewSlice(t)
	text := `kind = "colbert"
name = "tiny-colbert"
seed = 5
output_dir = "` + filepath.Join(dir, "runs") + `"
[data]
dir = "` + filepath.Join(dir, "data") + `"
[tokenizer]
file = "` + sliceTokenizer(t, dir) + `"
max_length = 24
[model]
encoder = "transformer"
hidden = 16
layers = 1
heads = 2
ffn = 32
max_position = 64
[loss]
name = "` + loss + `"
temperature = 1.0
[sampler]
` + samplerKeys + `
hard_negatives = 1
negative_window = [1, 20]
[train]
steps = 6
batch_size = 4
lr = 1e-3
warmup_steps = 1
log_every = 1
checkpoint_every = 2
[eval]
depth = 50
metrics = ["nDCG@10", "Recall@50"]
[colbert]
dim = 8
query_length = 8
document_length = 24
encode_batch = 16
ncells = 2
ndocs = 64
`
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("tinyRecipe: no %q to edit", edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	return testkit.WriteRecipe(t, dir, "recipe.toml", text)
}

// A ColBERT run interrupted after 3 steps and resumed ends with the uninterrupted run's
// parameters, bit for bit, and its metrics; the exact and PLAID runs and the index are written.
func TestColBERTResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := tinyRecipe(t, "colbert_contrastive", "")
	full, resumed, _ := testkit.Resume(t, rec, "train", 3)
	testkit.SameMetrics(t, "", full, resumed, testkit.Untimed)
	if w, g := testkit.LogSteps(t, full), testkit.LogSteps(t, resumed); len(w) != 6 || !slices.Equal(w, g) {
		t.Errorf("log steps resumed %v, uninterrupted %v", g, w)
	}
	a := testkit.SameCheckpoint(t, "", full, resumed, 6)
	if !slices.ContainsFunc(a.Params, func(p checkpoints.Tensor) bool { return p.Name == cb.ProjName }) {
		t.Fatalf("the checkpoint has no %s", cb.ProjName)
	}
	for _, f := range []string{"test.bm25.trec", "test.colbert.trec", "test.colbert_plaid.trec"} {
		if _, err := os.Stat(filepath.Join(full, experiment.RunsDir, f)); err != nil {
			t.Error(err)
		}
	}
	testkit.SameFile(t, filepath.Join(full, "plaid", cb.PlaidFile), filepath.Join(resumed, "plaid", cb.PlaidFile))
	p, man, err := cb.OpenPlaid(filepath.Join(full, "plaid"))
	if err != nil {
		t.Fatal(err)
	}
	mt, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	if man.Passages != 200 || p.C() != cb.CentroidCount(man.Tokens) || mt["colbert_plaid/centroids"] != float64(p.C()) {
		t.Errorf("index of %d passages, %d centroids for %d tokens", man.Passages, p.C(), man.Tokens)
	}
	if r := mt["colbert_plaid/recall_of_exact_top10"]; !(r > 0.3 && r <= 1) {
		t.Errorf("PLAID's recall of the exact top 10: %v", r)
	}
	if v := mt["colbert/nDCG@10"]; !(v > 0) {
		t.Errorf("colbert nDCG@10 %v", v)
	}
	// train export: a PyLate directory whose projection is the checkpoint's
	hf := filepath.Join(t.TempDir(), "pylate")
	if err := export.Export(full, hf, export.Options{}); err != nil {
		t.Fatal(err)
	}
	ts, _, err := checkpoints.ReadSafetensors(filepath.Join(hf, export.ColBERTDenseDir, export.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(a.Params, func(p checkpoints.Tensor) bool { return p.Name == cb.ProjName })
	if len(ts) != 1 || ts[0].Name != "linear.weight" || !slices.Equal(ts[0].Shape, []int{8, 16}) || !slices.Equal(ts[0].Data, a.Params[i].Data) {
		t.Fatalf("1_Dense holds %d tensors, the first %s %v", len(ts), ts[0].Name, ts[0].Shape)
	}
	var st map[string]any
	b2, err := os.ReadFile(filepath.Join(hf, export.STConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b2, &st)
	if st["query_prefix"] != "[unused0]" || st["document_prefix"] != "[unused1]" || st["query_length"] != 8.0 || st["document_length"] != 24.0 || st["similarity_fn_name"] != "MaxSim" {
		t.Fatalf("config_sentence_transformers.json: %v", st)
	}
	// evaluated again after the last step (a copy's metrics removed, resumed): the training
	// seconds are the checkpoint's, and the rankings the run's
	ck, err := checkpoints.Load(resumed)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(resumed, experiment.RunsDir, "test.colbert.trec"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(resumed, experiment.MetricsFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: resumed, Out: io.Discard, Progress: io.Discard}); err != nil {
		t.Fatal(err)
	}
	again, err := experiment.ReadMetrics(resumed)
	if err != nil {
		t.Fatal(err)
	}
	if v := again["train/seconds"]; !(v > 0) || v != ck.Trainer.TrainSeconds {
		t.Errorf("re-evaluated: train/seconds %v, the checkpoint's %v", v, ck.Trainer.TrainSeconds)
	}
	if after, err := os.ReadFile(filepath.Join(resumed, experiment.RunsDir, "test.colbert.trec")); err != nil || string(after) != string(before) {
		t.Errorf("re-evaluated: test.colbert.trec changed (err %v)", err)
	}
}

// A ColBERT run trained by gradient caching (train.mini_batch_size = 2 of 4 queries and 8
// passages) with length buckets (train.dynamic_padding; passages cut to 2-32 words, at most 48
// tokens: buckets 32 and 48) and dropout, interrupted after 3 steps and resumed, ends with the uninterrupted run's
// checkpoint bit for bit, the same log.jsonl lines (loss, lr, grad_norm of every step) and the
// same TREC runs; its losses are not the plain run's (other dropout masks), so the keys reach
// the task.
func TestColBERTGradCacheResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	edits := []string{"document_length = 24", "document_length = 48", "[model]\n", "[model]\ndropout = 0.1\n"}
	rec := tinyRecipe(t, "colbert_contrastive", "", append(edits, "checkpoint_every = 2", "checkpoint_every = 2\nmini_batch_size = 2\ndynamic_padding = true")...)
	shortenPassages(t, rec.Data.Dir)
	full, resumed, _ := testkit.Resume(t, rec, "train", 3)
	testkit.SameCheckpoint(t, "", full, resumed, 6)
	want, got := testkit.TrainLines(t, full), testkit.TrainLines(t, resumed)
	if len(want) != 6 || !slices.Equal(want, got) {
		t.Errorf("log resumed %v\nuninterrupted %v", got, want)
	}
	for _, f := range []string{"test.colbert.trec", "test.colbert_plaid.trec"} {
		testkit.SameFile(t, filepath.Join(full, experiment.RunsDir, f), filepath.Join(resumed, experiment.RunsDir, f))
	}
	plainRec := tinyRecipe(t, "colbert_contrastive", "", edits...)
	shortenPassages(t, plainRec.Data.Dir)
	plain, err := experiment.Run(context.Background(), plainRec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if p := testkit.TrainLines(t, plain); len(p) != 6 || p[0] == want[0] {
		t.Errorf("plain run's log %v, the cached run's %v", p, want)
	}
}

// shortenPassages cuts the text of passage i of dir/corpus.jsonl to its first 2 + 13i mod 31
// words, so that the tiny recipe's passages (title and text) fall into more than one bucket.
func shortenPassages(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "corpus.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p map[string]any
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatal(err)
		}
		w := strings.Fields(p["text"].(string))
		p["text"] = strings.Join(w[:min(len(w), 2+13*i%31)], " ")
		l, _ := json.Marshal(p)
		out = append(append(out, l...), '\n')
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
