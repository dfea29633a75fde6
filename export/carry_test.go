package export

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// savedRun saves src as the checkpoint of a run directory (tokenizer tokPath) and opens it,
// with an empty recipe for the caller to fill.
func savedRun(t *testing.T, src *model.BiEncoder, tokPath string) *Run {
	t.Helper()
	var ts []checkpoints.Tensor
	for _, p := range src.Params() {
		ts = append(ts, checkpoints.Tensor{Name: p.Name, Shape: slices.Clone([]int(p.Value.Shape())), Data: p.Value.Data().([]float32)})
	}
	run := filepath.Join(t.TempDir(), "run")
	cfg := model.BiEncoderConfig{Kind: KindBiEncoder, Encoder: src.Cfg, SharedTowers: src.Shared, Similarity: "cosine", Temperature: 0.05, MaxLength: 16}
	if err := checkpoints.Save(run, &checkpoints.Checkpoint{Params: ts, Config: cfg, TokenizerPath: tokPath,
		Trainer: checkpoints.TrainerState{Phase: "train", Step: 3}}); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRun(run)
	if err != nil {
		t.Fatal(err)
	}
	r.Recipe = &configs.Recipe{}
	return r
}

// pooledBertDir is hfBertDir with BertModel's pooler and position_ids buffer added (tensors the
// toolkit does not train), and every tensor of its model.safetensors.
func pooledBertDir(t *testing.T) (string, *model.BiEncoder, []checkpoints.RawTensor) {
	t.Helper()
	dir, src := hfBertDir(t)
	H, P := src.Cfg.Hidden, src.Cfg.MaxPosition
	pos := make([]int64, P)
	for i := range pos {
		pos[i] = int64(i)
	}
	w := make([]float32, H*H)
	for i := range w {
		w[i] = float32(i%7) / 7
	}
	rewriteModel(t, dir, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		return append(raw,
			checkpoints.F32Raw(checkpoints.Tensor{Name: "pooler.dense.weight", Shape: []int{H, H}, Data: w}),
			checkpoints.F32Raw(checkpoints.Tensor{Name: "pooler.dense.bias", Shape: []int{H}, Data: w[:H]}),
			checkpoints.I64Raw("embeddings.position_ids", []int{1, P}, pos))
	})
	in, _, err := checkpoints.ReadSafetensorsRaw(filepath.Join(dir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, src, in
}

// TestExportCarriesUntrainedTensors: issue 37's all-MiniLM-L6-v2 fine-tuned and exported lost
// pooler.dense.weight and pooler.dense.bias (transformers then initialised them at random).
// A run whose model.init_from is a BERT directory with a pooler and a position_ids buffer now
// exports every tensor that directory held: the trained ones under their names, the others
// byte for byte.
func TestExportCarriesUntrainedTensors(t *testing.T) {
	dir, src, in := pooledBertDir(t)

	// A run fine-tuned from dir: its checkpoint holds the trained parameters only.
	r := savedRun(t, src, filepath.Join(dir, TokenizerFile))
	r.Recipe.Model.InitFrom = dir
	out := filepath.Join(t.TempDir(), "export")
	var log strings.Builder
	if err := writeDir(out, func(tmp string) error { return exportBiEncoder(r, tmp, Options{Log: &log}) }); err != nil {
		t.Fatal(err)
	}
	got, _, err := checkpoints.ReadSafetensorsRaw(filepath.Join(out, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Errorf("%d tensors in %s, %d in the export", len(in), dir, len(got))
	}
	byName := map[string]checkpoints.RawTensor{}
	for _, g := range got {
		byName[g.Name] = g
	}
	for _, want := range in {
		g, ok := byName[want.Name]
		if !ok {
			t.Errorf("export lacks %s", want.Name)
			continue
		}
		if g.DType != want.DType || !slices.Equal(g.Shape, want.Shape) || !bytes.Equal(g.Data, want.Data) {
			t.Errorf("%s: %s %v in the export, %s %v imported (or other bytes)", want.Name, g.DType, g.Shape, want.DType, want.Shape)
		}
	}
	if !strings.Contains(log.String(), "carried 3 tensors") {
		t.Errorf("log %q", log.String())
	}
	// The export still imports: the carried tensors are skipped as the pooler always was.
	if _, err := InitBiEncoder(tinyModel(t, src.Cfg, true, 5), out); err != nil {
		t.Fatal(err)
	}
}

// TestColBERTExportCarriesThePooler: a ColBERT built from a BERT directory outside a run
// (tools/interop/colbertgo) lost BertModel's pooler (PyLate reported it MISSING); the tensors
// CarriedTensors returns for that directory are written beside the body's, byte for byte.
func TestColBERTExportCarriesThePooler(t *testing.T) {
	dir, src, in := pooledBertDir(t)
	var log strings.Builder
	carried := CarriedTensors(dir, src.Cfg, &log)
	if len(carried) != 3 || !strings.Contains(log.String(), "carried 3 tensors") {
		t.Fatalf("%d tensors carried; log %q", len(carried), log.String())
	}
	if CarriedTensors("", src.Cfg, &log) != nil {
		t.Error("no directory, yet tensors carried")
	}
	vocab := []string{"[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "wing", "flutter"}
	tok, err := tokenize.FromVocab(vocab, tokenize.DefaultVocabOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := src.Cfg
	cfg.Vocab = tok.VocabSize()
	m, err := colbert.New(colbert.Config{Encoder: cfg, Dim: 4, QueryLength: 8, DocumentLength: 16}, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pylate")
	if err := WriteColBERT(out, m, tok, carried); err != nil {
		t.Fatal(err)
	}
	got, _, err := checkpoints.ReadSafetensorsRaw(filepath.Join(out, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]checkpoints.RawTensor{}
	for _, g := range got {
		byName[g.Name] = g
	}
	for _, name := range []string{"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids"} {
		i := slices.IndexFunc(in, func(r checkpoints.RawTensor) bool { return r.Name == name })
		g, ok := byName[name]
		if i < 0 || !ok || !bytes.Equal(g.Data, in[i].Data) || !slices.Equal(g.Shape, in[i].Shape) {
			t.Errorf("%s: in the export %v, in %s %v", name, ok, dir, i >= 0)
		}
	}
	if _, ok := byName["encoder.layer.0.attention.self.query.weight"]; !ok || len(got) != len(in) {
		t.Errorf("%d tensors in the export, %d in %s", len(got), len(in), dir)
	}
}
