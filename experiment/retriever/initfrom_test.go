package retriever

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// initRecipe writes and loads a retriever recipe over the Cranfield slice in dir (newSlice).
func initRecipe(t *testing.T, dir, name, modelKeys string, pretrain, train int, initFrom string) *configs.Recipe {
	t.Helper()
	if initFrom != "" {
		modelKeys += fmt.Sprintf("\ninit_from = %q", initFrom)
	}
	vars := map[string]string{"NAME": name, "OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data"),
		"MODEL": modelKeys, "PRETRAIN": fmt.Sprint(pretrain), "TRAIN": fmt.Sprint(train)}
	return testkit.Recipe(t, "retriever-init", filepath.Join(dir, name+".toml"), vars, "")
}

func runRecipe(t *testing.T, rec *configs.Recipe) (string, string) {
	t.Helper()
	var out bytes.Buffer
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%s: %v\n%s", rec.Name, err, out.String())
	}
	return dir, out.String()
}

// firstLoss is the loss of the first line of log.jsonl in phase.
func firstLoss(t *testing.T, runDir, phase string) float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Phase string  `json:"phase"`
			Loss  float64 `json:"loss"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		if l.Phase == phase {
			return l.Loss
		}
	}
	t.Fatalf("%s: no %s line", runDir, phase)
	return 0
}

// TestInitFromExport trains a run, exports it, and starts new runs from the export: with no
// training steps they rank exactly as the exported model did (their initial parameters are the
// exported ones, bit for bit), with some they continue from it rather than from scratch.
func TestInitFromExport(t *testing.T) {
	dir := testkit.NewSlice(t)
	const bow = `encoder = "bow"
hidden = 48`
	runA, _ := runRecipe(t, initRecipe(t, dir, "a", bow, 20, 20, ""))
	exp := filepath.Join(dir, "export")
	if err := export.Export(runA, exp, export.Options{Embeddings: true}); err != nil {
		t.Fatal(err)
	}

	// The parameters a recipe starts from are the exported ones, bit for bit.
	ck, err := checkpoints.Load(runA)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Load(filepath.Join(exp, export.TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 48, Dropout: 0.1}
	m, err := model.NewBiEncoder(cfg, true, 99)
	if err != nil {
		t.Fatal(err)
	}
	if err := experiment.InitFrom(m, exp, io.Discard); err != nil {
		t.Fatal(err)
	}
	trained := map[string][]float32{}
	for _, p := range ck.Params {
		trained[p.Name] = p.Data
	}
	for _, p := range m.Params() {
		got, want := p.Value.Data().([]float32), trained[p.Name]
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, checkpoint %d", p.Name, len(got), len(want))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d] = %v, checkpoint %v", p.Name, i, got[i], want[i])
			}
		}
	}

	// The corpus embeddings are the passage vectors evaluation ranked with.
	ids, vecs, man, err := export.ReadEmbeddings(filepath.Join(exp, export.EmbeddingsDir))
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := data.LoadCorpus(filepath.Join(dir, "data", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	passages := make([]string, corpus.Len())
	for i := range passages {
		passages[i] = corpus.Passage(i, true)
	}
	pv, err := biencoder.EncodeTexts(m.Passage, tok, passages, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	biencoder.NormalizeRows(pv, 48)
	if len(ids) != corpus.Len() || ids[0] != corpus.IDs[0] || len(vecs) != len(pv) || man.Dim != 48 || !man.Normalized ||
		man.IndexVersion != "train-20" || man.ModelFile != "model.safetensors" {
		t.Fatalf("embeddings: %d ids, %d values, manifest %+v", len(ids), len(vecs), man)
	}
	for i := range pv {
		if math.Float32bits(pv[i]) != math.Float32bits(vecs[i]) {
			t.Fatalf("embeddings.npy value %d = %v, encoder %v", i, vecs[i], pv[i])
		}
	}

	// A run with init_from and no steps ranks exactly as the exported run did.
	runB, outB := runRecipe(t, initRecipe(t, dir, "b", bow, 0, 0, exp))
	if !strings.Contains(outB, "init_from: 3 parameters from "+exp+" (export layout)") ||
		!strings.Contains(outB, "tokenizer: "+filepath.Join(exp, export.TokenizerFile)) {
		t.Errorf("run output lacks the init_from lines:\n%s", outB)
	}
	testkit.SameFile(t, filepath.Join(runA, experiment.RunsDir, "test.dense.trec"), filepath.Join(runB, experiment.RunsDir, "test.dense.trec"))
	testkit.SameFile(t, filepath.Join(runA, checkpoints.TokenizerFile), filepath.Join(runB, checkpoints.TokenizerFile))

	// With steps it continues from the export: its first losses are far below a fresh start's.
	runC, _ := runRecipe(t, initRecipe(t, dir, "c", bow, 0, 10, exp))
	runD, _ := runRecipe(t, initRecipe(t, dir, "d", bow, 0, 10, ""))
	c, d := firstLoss(t, runC, "train"), firstLoss(t, runD, "train")
	t.Logf("first train loss: from the export %.4f, from scratch %.4f", c, d)
	if !(c < d-0.5) {
		t.Errorf("first train loss from the export %.4f, from scratch %.4f: want the export's well below", c, d)
	}

	// A recipe whose [model] sets another shape than the export's fails before any work,
	// naming the key, its line and the checkpoint's value (experiment.ResolveInitFrom).
	var out bytes.Buffer
	_, err = experiment.Run(context.Background(), initRecipe(t, dir, "e", "encoder = \"bow\"\nhidden = 32", 0, 0, exp), experiment.Options{Out: &out, Progress: io.Discard})
	if err == nil {
		t.Fatal("hidden 32 from a hidden-48 export: no error")
	}
	for _, s := range []string{"e.toml:", ": model.hidden: 32", "model.init_from " + exp + " has 48"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	// Unset, the keys come from the export.
	out.Reset()
	if _, err := experiment.Run(context.Background(), initRecipe(t, dir, "f", "encoder = \"bow\"", 0, 0, exp), experiment.Options{Out: &out, Progress: io.Discard}); err != nil {
		t.Fatalf("hidden unset: %v", err)
	}
	if !strings.Contains(out.String(), "hidden = 48") {
		t.Errorf("output does not say hidden = 48 came from the export:\n%s", out.String())
	}
}

// TestInitFromSeparateTransformer does the same with separate transformer towers: the export
// holds query/ and passage/ BERT directories, and a run started from it ranks as the original.
func TestInitFromSeparateTransformer(t *testing.T) {
	dir := testkit.NewSlice(t)
	const tf = `encoder = "transformer"
hidden = 16
layers = 1
heads = 2
ffn = 32
max_position = 32
shared_towers = false`
	runA, _ := runRecipe(t, initRecipe(t, dir, "a", tf, 0, 6, ""))
	exp := filepath.Join(dir, "export")
	if err := export.Export(runA, exp, export.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"query/config.json", "passage/model.safetensors", "passage/1_Pooling/config.json"} {
		if _, err := os.Stat(filepath.Join(exp, f)); err != nil {
			t.Errorf("export lacks %s", f)
		}
	}
	runB, _ := runRecipe(t, initRecipe(t, dir, "b", tf, 0, 0, exp))
	testkit.SameFile(t, filepath.Join(runA, experiment.RunsDir, "test.dense.trec"), filepath.Join(runB, experiment.RunsDir, "test.dense.trec"))
}
