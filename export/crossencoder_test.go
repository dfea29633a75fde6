package export

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
)

// tinyCrossEncoder is a cross-encoder whose every parameter (biases and LayerNorms included)
// holds distinct random values, so a round trip that drops or swaps a tensor shows.
func tinyCrossEncoder(t *testing.T, vocab int, seed uint64) *model.CrossEncoder {
	t.Helper()
	m, err := model.NewCrossEncoder(tinyConfig(model.EncoderTransformer, vocab), seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 77))
	for _, p := range m.Params() {
		d := p.Value.Data().([]float32)
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
	}
	return m
}

var tinyCEMeta = CrossEncoderMeta{MaxLength: 20, Loss: "listwise", FirstStage: "bm25", TrainDepth: 30, ListSize: 8, PretrainSteps: 5}

// TestCrossEncoderRoundTripBitExact writes a cross-encoder as BertForSequenceClassification,
// checks the tensor names and shapes against Hugging Face's, and reads it back bit for bit.
func TestCrossEncoderRoundTripBitExact(t *testing.T) {
	tok := tinyTokenizer(t)
	m := tinyCrossEncoder(t, tok.VocabSize(), 1)
	out := filepath.Join(t.TempDir(), "ce")
	if err := WriteCrossEncoder(out, m, tok, tinyCEMeta); err != nil {
		t.Fatal(err)
	}
	raw, meta, err := checkpoints.ReadSafetensorsRaw(filepath.Join(out, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if meta["format"] != "pt" {
		t.Errorf("metadata %v, want format pt", meta)
	}
	shapes := map[string][]int{}
	for _, r := range raw {
		if r.DType != checkpoints.F32 {
			t.Errorf("%s: dtype %s, want F32", r.Name, r.DType)
		}
		shapes[r.Name] = r.Shape
	}
	V := tok.VocabSize()
	want := map[string][]int{
		"bert.embeddings.word_embeddings.weight":       {V, 16},
		"bert.embeddings.position_embeddings.weight":   {20, 16},
		"bert.embeddings.token_type_embeddings.weight": {2, 16},
		"bert.embeddings.LayerNorm.weight":             {16},
		"bert.embeddings.LayerNorm.bias":               {16},
		"bert.pooler.dense.weight":                     {16, 16},
		"bert.pooler.dense.bias":                       {16},
		"classifier.weight":                            {1, 16},
		"classifier.bias":                              {1},
	}
	for l := range 2 {
		p := "bert.encoder.layer." + string(rune('0'+l)) + "."
		for _, n := range []string{"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"} {
			want[p+n+".weight"], want[p+n+".bias"] = []int{16, 16}, []int{16}
		}
		want[p+"attention.output.LayerNorm.weight"], want[p+"attention.output.LayerNorm.bias"] = []int{16}, []int{16}
		want[p+"intermediate.dense.weight"], want[p+"intermediate.dense.bias"] = []int{24, 16}, []int{24}
		want[p+"output.dense.weight"], want[p+"output.dense.bias"] = []int{16, 24}, []int{16}
		want[p+"output.LayerNorm.weight"], want[p+"output.LayerNorm.bias"] = []int{16}, []int{16}
	}
	if len(shapes) != len(want) {
		t.Errorf("%d tensors, want %d", len(shapes), len(want))
	}
	for n, s := range want {
		if !slices.Equal(shapes[n], s) {
			t.Errorf("%s: shape %v, want %v", n, shapes[n], s)
		}
	}

	back := tinyCrossEncoder(t, tok.VocabSize(), 2)
	d, err := InitCrossEncoder(back, out)
	if err != nil {
		t.Fatal(err)
	}
	if d.Layout != LayoutExport || d.MaxLength != 20 || d.Tokenizer != filepath.Join(out, TokenizerFile) || d.Encoder.Pooling != model.PoolingCLS {
		t.Errorf("opened %+v", d)
	}
	equalBits(t, m.Params(), back.Params())
}

func TestCrossEncoderConfigFields(t *testing.T) {
	tok := tinyTokenizer(t)
	out := filepath.Join(t.TempDir(), "ce")
	if err := WriteCrossEncoder(out, tinyCrossEncoder(t, tok.VocabSize(), 1), tok, tinyCEMeta); err != nil {
		t.Fatal(err)
	}
	checkFields(t, filepath.Join(out, ConfigFile), map[string]any{
		"architectures": []any{"BertForSequenceClassification"}, "model_type": "bert", "num_labels": 1,
		"id2label": map[string]any{"0": "LABEL_0"}, "label2id": map[string]any{"LABEL_0": 0},
		"vocab_size": tok.VocabSize(), "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
		"intermediate_size": 24, "max_position_embeddings": 20, "type_vocab_size": 2, "hidden_act": "gelu",
		"layer_norm_eps": 1e-12, "pad_token_id": 0, "hidden_dropout_prob": 0.1, "position_embedding_type": "absolute",
		"classifier_dropout": nil, "sentence_transformers": map[string]any{"activation_fn": "torch.nn.modules.linear.Identity"},
	})
	checkFields(t, filepath.Join(out, TokenizerConfigFile), map[string]any{
		"tokenizer_class": "BertTokenizer", "model_max_length": 20, "cls_token": "[CLS]", "sep_token": "[SEP]",
	})
	checkFields(t, filepath.Join(out, SpecialTokensFile), map[string]any{"cls_token": "[CLS]", "pad_token": "[PAD]"})
	checkFields(t, filepath.Join(out, ManifestFile), map[string]any{
		"kind": "cross-encoder", "encoder": "transformer", "pooling": "cls", "max_length": 20, "loss": "listwise",
		"first_stage": "bm25", "train_depth": 30, "list_size": 8, "pretrain_steps": 5, "format_version": 1,
	})
	readme, err := os.ReadFile(filepath.Join(out, ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"BertForSequenceClassification", "listwise loss", "first stage\n`bm25`", "5 steps of label-free cropping"} {
		if !strings.Contains(string(readme), s) {
			t.Errorf("README.md lacks %q:\n%s", s, readme)
		}
	}
}

// TestCrossEncoderExportRefusesMeanPooling: no Hugging Face head pools by the mean, so such a
// model is not exported under BERT's name.
func TestCrossEncoderExportRefusesMeanPooling(t *testing.T) {
	tok := tinyTokenizer(t)
	cfg := tinyConfig(model.EncoderTransformer, tok.VocabSize())
	cfg.Pooling = model.PoolingMean
	m, err := model.NewCrossEncoder(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ce")
	err = WriteCrossEncoder(out, m, tok, tinyCEMeta)
	if err == nil || !strings.Contains(err.Error(), `pools by "mean"`) || !strings.Contains(err.Error(), `model.pooling = "cls"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused export left its directory")
	}
}

// TestCrossEncoderImportMismatches: a wrongly shaped tensor is named with both shapes, and
// missing and unexpected tensors are listed, in one *MismatchError.
func TestCrossEncoderImportMismatches(t *testing.T) {
	tok := tinyTokenizer(t)
	out := filepath.Join(t.TempDir(), "ce")
	if err := WriteCrossEncoder(out, tinyCrossEncoder(t, tok.VocabSize(), 1), tok, tinyCEMeta); err != nil {
		t.Fatal(err)
	}
	rewriteModel(t, out, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		var keep []checkpoints.RawTensor
		for _, r := range raw {
			switch r.Name {
			case "classifier.weight":
				r.Shape = []int{2, 8} // same bytes, two labels of half the width
			case "bert.pooler.dense.bias":
				continue
			}
			keep = append(keep, r)
		}
		return append(keep, checkpoints.F32Raw(checkpoints.Tensor{Name: "cls.predictions.bias", Shape: []int{3}, Data: make([]float32, 3)}))
	})
	_, err := InitCrossEncoder(tinyCrossEncoder(t, tok.VocabSize(), 2), out)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("error %v, want a *MismatchError", err)
	}
	if len(mm.WrongShape) != 1 || len(mm.Missing) != 1 || len(mm.Unexpected) != 1 {
		t.Fatalf("%+v", mm)
	}
	for _, s := range []string{"1 missing, 1 unexpected, 1 wrongly shaped",
		"wrong shape: classifier.weight in " + filepath.Join(out, ModelFile) + " is [2 8], parameter classifier.weight is [1 16]",
		"missing: bert.pooler.dense.bias [16] for parameter pooler.bias",
		"unexpected: cls.predictions.bias [3]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}

	// A BERT directory with more than one label is not a reranker.
	cfgPath := filepath.Join(out, ConfigFile)
	b, _ := os.ReadFile(cfgPath)
	b = []byte(strings.Replace(string(b), `"num_labels": 1`, `"num_labels": 2`, 1))
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCrossEncoder(out); err == nil || !strings.Contains(err.Error(), "2 labels") || !strings.Contains(err.Error(), cfgPath) {
		t.Errorf("two labels: err = %v", err)
	}
}
