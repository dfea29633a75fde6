package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

var tinyTexts = []string{
	"The boundary layer on a flat plate in supersonic flow.",
	"Heat transfer to a cone at high Mach number.",
	"Flutter of swept wings; an experimental study.",
	"Buckling of thin cylindrical shells under axial compression.",
}

// tinyTokenizer trains a small WordPiece vocabulary (deterministic).
func tinyTokenizer(t testing.TB) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Train(tinyTexts, tokenize.TrainOptions{VocabSize: 150, MinFrequency: 1, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func tinyConfig(encoder string, vocab int) model.EncoderConfig {
	if encoder == model.EncoderBow {
		return model.EncoderConfig{Encoder: encoder, Vocab: vocab, Hidden: 12, Dropout: 0.1}
	}
	return model.EncoderConfig{Encoder: encoder, Vocab: vocab, Hidden: 16, Layers: 2, Heads: 4, FFN: 24,
		MaxPosition: 20, Dropout: 0.1, Pooling: model.PoolingCLS}
}

func tinyModel(t testing.TB, cfg model.EncoderConfig, shared bool, seed uint64) *model.BiEncoder {
	t.Helper()
	m, err := model.NewBiEncoder(cfg, shared, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var tinyMeta = BiEncoderMeta{Similarity: "cosine", Temperature: 0.05, MaxLength: 16}

// equalBits fails unless a and b have the same parameters (names compared without the tower
// prefix), bit for bit.
func equalBits(t *testing.T, a, b []*model.Param) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d parameters vs %d", len(a), len(b))
	}
	rest := func(s string) string { _, r, _ := strings.Cut(s, "."); return r }
	for i := range a {
		x, y := a[i].Value.Data().([]float32), b[i].Value.Data().([]float32)
		if rest(a[i].Name) != rest(b[i].Name) || !slices.Equal(a[i].Value.Shape(), b[i].Value.Shape()) {
			t.Fatalf("parameter %d: %s %v vs %s %v", i, a[i].Name, a[i].Value.Shape(), b[i].Name, b[i].Value.Shape())
		}
		for j := range x {
			if math.Float32bits(x[j]) != math.Float32bits(y[j]) {
				t.Fatalf("%s[%d]: %08x vs %08x", a[i].Name, j, math.Float32bits(x[j]), math.Float32bits(y[j]))
			}
		}
	}
}

func TestRoundTripBitExact(t *testing.T) {
	tok := tinyTokenizer(t)
	for _, enc := range []string{model.EncoderBow, model.EncoderTransformer} {
		for _, shared := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/shared=%v", enc, shared), func(t *testing.T) {
				cfg := tinyConfig(enc, tok.VocabSize())
				src := tinyModel(t, cfg, shared, 1)
				// a value of every kind survives: signed zero, subnormal, extremes
				w := src.Params()[0].Value.Data().([]float32)
				w[0], w[1], w[2], w[3] = float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, math.MaxFloat32, -1e-38
				out := filepath.Join(t.TempDir(), "export")
				if err := WriteBiEncoder(out, src, tok, tinyMeta); err != nil {
					t.Fatal(err)
				}
				dst := tinyModel(t, cfg, shared, 2)
				d, err := InitBiEncoder(dst, out)
				if err != nil {
					t.Fatal(err)
				}
				equalBits(t, src.Params(), dst.Params())
				if d.Layout != LayoutExport || d.Shared != shared || d.Similarity != "cosine" || d.MaxLength != 16 || len(d.Ignored) != 0 {
					t.Errorf("opened as %+v", d)
				}
				wantCfg := cfg
				if wantCfg.Pooling == "" {
					wantCfg.Pooling = model.PoolingMean
				}
				if d.Encoder != wantCfg {
					t.Errorf("encoder config %+v, want %+v", d.Encoder, wantCfg)
				}
				towers := []string{"."}
				if !shared {
					towers = []string{"query", "passage"}
				}
				for _, tw := range towers {
					for _, f := range []string{ModelFile, ConfigFile, TokenizerFile, TokenizerConfigFile, SpecialTokensFile} {
						if !exists(filepath.Join(out, tw, f)) {
							t.Errorf("%s/%s is missing", tw, f)
						}
					}
					st := exists(filepath.Join(out, tw, ModulesFile))
					if st != (enc == model.EncoderTransformer) {
						t.Errorf("%s: modules.json present = %v for a %s encoder", tw, st, enc)
					}
				}
				if d.Tokenizer != filepath.Join(out, towers[0], TokenizerFile) {
					t.Errorf("tokenizer %q", d.Tokenizer)
				}
			})
		}
	}
}

// TestTensorNames pins the state-dict names of each layout.
func TestTensorNames(t *testing.T) {
	tok := tinyTokenizer(t)
	want := map[string][]string{
		model.EncoderBow: {"dense.bias", "dense.weight", "embeddings.word_embeddings.weight"},
		model.EncoderTransformer: {
			"embeddings.LayerNorm.bias", "embeddings.LayerNorm.weight", "embeddings.position_embeddings.weight",
			"embeddings.token_type_embeddings.weight", "embeddings.word_embeddings.weight",
		},
	}
	for l := range 2 {
		for _, s := range []string{"attention.output.LayerNorm", "attention.output.dense", "attention.self.key",
			"attention.self.query", "attention.self.value", "intermediate.dense", "output.LayerNorm", "output.dense"} {
			for _, wb := range []string{"bias", "weight"} {
				want[model.EncoderTransformer] = append(want[model.EncoderTransformer], fmt.Sprintf("encoder.layer.%d.%s.%s", l, s, wb))
			}
		}
	}
	for enc, names := range want {
		out := filepath.Join(t.TempDir(), "x")
		m := tinyModel(t, tinyConfig(enc, tok.VocabSize()), true, 1)
		if err := WriteBiEncoder(out, m, tok, tinyMeta); err != nil {
			t.Fatal(err)
		}
		raw, meta, err := checkpoints.ReadSafetensorsRaw(filepath.Join(out, ModelFile))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range raw {
			if r.DType != checkpoints.F32 {
				t.Errorf("%s: %s", r.Name, r.DType)
			}
			got = append(got, r.Name)
		}
		slices.Sort(got)
		slices.Sort(names)
		if !slices.Equal(got, names) {
			t.Errorf("%s names\n%v\nwant\n%v", enc, got, names)
		}
		if meta["format"] != "pt" {
			t.Errorf("%s: metadata %v, want format=pt (transformers checks it)", enc, meta)
		}
	}
}

func readMap(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func checkFields(t *testing.T, path string, want map[string]any) {
	t.Helper()
	got := readMap(t, path)
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s: %s = %v, want %v", filepath.Base(path), k, got[k], v)
		}
	}
}

func TestConfigFields(t *testing.T) {
	tok := tinyTokenizer(t)
	out := filepath.Join(t.TempDir(), "bert")
	m := tinyModel(t, tinyConfig(model.EncoderTransformer, tok.VocabSize()), true, 1)
	if err := WriteBiEncoder(out, m, tok, BiEncoderMeta{Similarity: "dot", MaxLength: 16}); err != nil {
		t.Fatal(err)
	}
	checkFields(t, filepath.Join(out, ConfigFile), map[string]any{
		"model_type": "bert", "architectures": []any{"BertModel"}, "vocab_size": tok.VocabSize(), "hidden_size": 16,
		"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24, "max_position_embeddings": 20,
		"type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1,
		"attention_probs_dropout_prob": 0.1, "pad_token_id": 0, "position_embedding_type": "absolute",
		"initializer_range": 0.02, "torch_dtype": "float32",
	})
	checkFields(t, filepath.Join(out, TokenizerConfigFile), map[string]any{
		"tokenizer_class": "BertTokenizer", "do_lower_case": true, "model_max_length": 16,
		"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]",
	})
	checkFields(t, filepath.Join(out, SpecialTokensFile), map[string]any{
		"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]",
	})
	checkFields(t, filepath.Join(out, PoolingConfigFile), map[string]any{
		"word_embedding_dimension": 16, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false,
		"pooling_mode_max_tokens": false, "pooling_mode_lasttoken": false,
	})
	checkFields(t, filepath.Join(out, STConfigFile), map[string]any{"similarity_fn_name": "dot"})
	checkFields(t, filepath.Join(out, SentenceBertFile), map[string]any{"max_seq_length": 16, "do_lower_case": false})
	checkFields(t, filepath.Join(out, ManifestFile), map[string]any{
		"kind": "bi-encoder", "encoder": "transformer", "shared_towers": true, "pooling": "cls", "similarity": "dot",
		"max_length": 16, "format_version": 1,
	})
	var modules []stModule
	if err := readJSON(filepath.Join(out, ModulesFile), &modules, true); err != nil {
		t.Fatal(err)
	}
	if len(modules) != 2 || modules[0].Path != "" || modules[0].Type != "sentence_transformers.models.Transformer" ||
		modules[1].Path != "1_Pooling" || modules[1].Type != "sentence_transformers.models.Pooling" {
		t.Errorf("modules.json %+v", modules)
	}
	// The exported tokenizer encodes as the original.
	again, err := tokenize.Load(filepath.Join(out, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tinyTexts {
		if a, b := tok.Encode(s), again.Encode(s); !slices.Equal(a, b) {
			t.Errorf("%q: %v vs %v", s, a, b)
		}
	}

	bow := filepath.Join(t.TempDir(), "bow")
	if err := WriteBiEncoder(bow, tinyModel(t, tinyConfig(model.EncoderBow, tok.VocabSize()), true, 1), tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	checkFields(t, filepath.Join(bow, ConfigFile), map[string]any{
		"model_type": "ragtrain-bow", "vocab_size": tok.VocabSize(), "hidden_size": 12, "pooling": "mean", "pad_token_id": 0,
	})
}

// rewriteModel rewrites dir/model.safetensors through edit.
func rewriteModel(t *testing.T, dir string, edit func([]checkpoints.RawTensor) []checkpoints.RawTensor) {
	t.Helper()
	path := filepath.Join(dir, ModelFile)
	raw, meta, err := checkpoints.ReadSafetensorsRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoints.WriteSafetensorsRaw(path, edit(raw), meta); err != nil {
		t.Fatal(err)
	}
}

func TestWrongShapeNamesTensorAndShapes(t *testing.T) {
	tok := tinyTokenizer(t)
	cfg := tinyConfig(model.EncoderTransformer, tok.VocabSize())
	out := filepath.Join(t.TempDir(), "x")
	if err := WriteBiEncoder(out, tinyModel(t, cfg, true, 1), tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	rewriteModel(t, out, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		for i := range raw {
			if raw[i].Name == "encoder.layer.1.attention.self.query.weight" {
				raw[i].Shape = []int{8, 32} // same bytes, transposed-looking shape
			}
		}
		return raw
	})
	_, err := InitBiEncoder(tinyModel(t, cfg, true, 2), out)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("error %v, want a *MismatchError", err)
	}
	if len(mm.WrongShape) != 1 || len(mm.Missing) != 0 || len(mm.Unexpected) != 0 {
		t.Fatalf("%+v", mm)
	}
	for _, s := range []string{"encoder.layer.1.attention.self.query.weight", "[8 32]", "[16 16]",
		"encoder.layer.1.attn.q.weight", filepath.Join(out, ModelFile), "wrong shape"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

func TestMissingAndUnexpectedListed(t *testing.T) {
	tok := tinyTokenizer(t)
	cfg := tinyConfig(model.EncoderTransformer, tok.VocabSize())
	out := filepath.Join(t.TempDir(), "x")
	if err := WriteBiEncoder(out, tinyModel(t, cfg, true, 1), tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	rewriteModel(t, out, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		var keep []checkpoints.RawTensor
		for _, r := range raw {
			if r.Name != "encoder.layer.0.output.dense.bias" && r.Name != "embeddings.LayerNorm.weight" {
				keep = append(keep, r)
			}
		}
		extra := checkpoints.F32Raw(checkpoints.Tensor{Name: "encoder.layer.2.output.dense.bias", Shape: []int{16}, Data: make([]float32, 16)})
		return append(keep, extra)
	})
	_, err := InitBiEncoder(tinyModel(t, cfg, true, 2), out)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("error %v, want a *MismatchError", err)
	}
	var missing, unexpected []string
	for _, r := range mm.Missing {
		missing = append(missing, r.Name)
	}
	for _, r := range mm.Unexpected {
		unexpected = append(unexpected, r.Name)
	}
	if !slices.Equal(missing, []string{"embeddings.LayerNorm.weight", "encoder.layer.0.output.dense.bias"}) ||
		!slices.Equal(unexpected, []string{"encoder.layer.2.output.dense.bias"}) || len(mm.WrongShape) != 0 {
		t.Fatalf("missing %v, unexpected %v, wrong shapes %v", missing, unexpected, mm.WrongShape)
	}
	for _, s := range []string{"2 missing, 1 unexpected, 0 wrongly shaped",
		"missing: embeddings.LayerNorm.weight [16] for parameter encoder.embeddings.norm.weight",
		"unexpected: encoder.layer.2.output.dense.bias [16]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

// TestImportHuggingFaceBert reads a directory as transformers' BertForMaskedLM would save it:
// "bert." prefixes, a pooler, MLM heads and the position_ids buffer, half-precision tensors.
func TestImportHuggingFaceBert(t *testing.T) {
	tok := tinyTokenizer(t)
	cfg := tinyConfig(model.EncoderTransformer, tok.VocabSize())
	src := tinyModel(t, cfg, true, 1)
	out := filepath.Join(t.TempDir(), "x")
	if err := WriteBiEncoder(out, src, tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ManifestFile, ModulesFile, PoolingConfigFile, STConfigFile, SentenceBertFile} {
		os.Remove(filepath.Join(out, f))
	}
	// Word embeddings stored as BF16 and the embedding LayerNorm as F16: values that both
	// formats hold exactly.
	word := src.Param("encoder.embeddings.word").Value.Data().([]float32)
	for i := range word {
		word[i] = math.Float32frombits(math.Float32bits(word[i]) &^ 0xffff)
	}
	norm := src.Param("encoder.embeddings.norm.weight").Value.Data().([]float32)
	for i := range norm {
		norm[i] = float32(i+1) / 64
	}
	rewriteModel(t, out, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		for i := range raw {
			switch raw[i].Name {
			case "embeddings.word_embeddings.weight":
				b := make([]byte, 2*len(word))
				for j, v := range word {
					b[2*j], b[2*j+1] = byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24)
				}
				raw[i] = checkpoints.RawTensor{Name: raw[i].Name, DType: checkpoints.BF16, Shape: raw[i].Shape, Data: b}
			case "embeddings.LayerNorm.weight":
				b := make([]byte, 2*len(norm))
				for j := range norm {
					h := f16(norm[j])
					b[2*j], b[2*j+1] = byte(h), byte(h>>8)
				}
				raw[i] = checkpoints.RawTensor{Name: raw[i].Name, DType: checkpoints.F16, Shape: raw[i].Shape, Data: b}
			}
			raw[i].Name = "bert." + raw[i].Name
		}
		return append(raw,
			checkpoints.F32Raw(checkpoints.Tensor{Name: "bert.pooler.dense.weight", Shape: []int{16, 16}, Data: make([]float32, 256)}),
			checkpoints.F32Raw(checkpoints.Tensor{Name: "bert.pooler.dense.bias", Shape: []int{16}, Data: make([]float32, 16)}),
			checkpoints.F32Raw(checkpoints.Tensor{Name: "cls.predictions.bias", Shape: []int{tok.VocabSize()}, Data: make([]float32, tok.VocabSize())}),
			checkpoints.I64Raw("bert.embeddings.position_ids", []int{1, 20}, make([]int64, 20)))
	})
	// A transformers config carries many more fields; they are ignored.
	cfgPath := filepath.Join(out, ConfigFile)
	c := readMap(t, cfgPath)
	c["architectures"] = []string{"BertForMaskedLM"}
	c["transformers_version"] = "4.41.2"
	c["gradient_checkpointing"] = false
	b, _ := json.Marshal(c)
	os.WriteFile(cfgPath, b, 0o644)

	dst := tinyModel(t, cfg, false, 2) // one BERT initialises both towers
	d, err := InitBiEncoder(dst, out)
	if err != nil {
		t.Fatal(err)
	}
	equalBits(t, src.Params(), dst.Query.Params())
	if d.Layout != LayoutHuggingFace || !d.Shared || d.Encoder.Pooling != "" || d.Similarity != "" || len(d.Ignored) != 4 {
		t.Errorf("opened as %+v", d)
	}
	for i, p := range dst.Passage.Params() {
		if !slices.Equal(p.Value.Data().([]float32), src.Params()[i].Value.Data().([]float32)) {
			t.Errorf("passage tower %s differs from the BERT weights", p.Name)
		}
	}

	// config values this encoder does not compute are refused, naming file and field
	for field, v := range map[string]any{"hidden_act": "gelu_new", "layer_norm_eps": 1e-5, "position_embedding_type": "relative_key", "type_vocab_size": 1} {
		c := readMap(t, cfgPath)
		old := c[field]
		c[field] = v
		b, _ := json.Marshal(c)
		os.WriteFile(cfgPath, b, 0o644)
		_, err := OpenBiEncoder(out)
		if err == nil || !strings.Contains(err.Error(), cfgPath) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s = %v: %v", field, v, err)
		}
		c[field] = old
		b, _ = json.Marshal(c)
		os.WriteFile(cfgPath, b, 0o644)
	}
}

// f16 encodes a float32 that binary16 holds exactly (normal range).
func f16(v float32) uint16 {
	b := math.Float32bits(v)
	exp := int(b>>23&0xff) - 127 + 15
	return uint16(b>>16&0x8000) | uint16(exp)<<10 | uint16(b>>13&0x3ff)
}

func TestHalfToFloat32(t *testing.T) {
	cases := []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08}, {0x03ff, 6.097555160522461e-05},
		{0x0400, 6.103515625e-05}, {0x8000, float32(math.Copysign(0, -1))}, {0x7c00, float32(math.Inf(1))},
	}
	for _, c := range cases {
		if got := halfToFloat32(c.h); math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("%#04x: %v, want %v", c.h, got, c.want)
		}
	}
	if !math.IsNaN(float64(halfToFloat32(0x7e00))) {
		t.Error("0x7e00 is not NaN")
	}
}

func TestInitRefusesIncompatibleModels(t *testing.T) {
	tok := tinyTokenizer(t)
	cfg := tinyConfig(model.EncoderTransformer, tok.VocabSize())
	dir := t.TempDir()
	sep := filepath.Join(dir, "separate")
	if err := WriteBiEncoder(sep, tinyModel(t, cfg, false, 1), tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	heads := cfg
	heads.Heads = 2
	bow := tinyConfig(model.EncoderBow, tok.VocabSize())
	cases := []struct {
		name string
		m    *model.BiEncoder
		want string
	}{
		{"separate into shared", tinyModel(t, cfg, true, 2), "separate query and passage towers; the model shares one"},
		{"heads", tinyModel(t, heads, false, 2), "has 4 attention heads; the model has 2"},
		{"encoder kind", tinyModel(t, bow, false, 2), "holds a transformer encoder; the model is bow"},
	}
	for _, c := range cases {
		if _, err := InitBiEncoder(c.m, sep); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), sep) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", c.name, err, sep, c.want)
		}
	}
	if _, err := OpenBiEncoder(dir); err == nil || !strings.Contains(err.Error(), "not a model directory") {
		t.Errorf("empty directory: %v", err)
	}
}

func TestWriteRefusesNonEmptyDir(t *testing.T) {
	tok := tinyTokenizer(t)
	m := tinyModel(t, tinyConfig(model.EncoderBow, tok.VocabSize()), true, 1)
	out := t.TempDir()
	os.WriteFile(filepath.Join(out, "keep.txt"), []byte("x"), 0o644)
	if err := WriteBiEncoder(out, m, tok, tinyMeta); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty out: %v", err)
	}
	// an empty existing directory is fine, and a failed export leaves nothing behind
	empty := filepath.Join(t.TempDir(), "e")
	os.Mkdir(empty, 0o755)
	if err := WriteBiEncoder(empty, m, tok, BiEncoderMeta{Similarity: "l2", MaxLength: 8}); err == nil {
		t.Fatal("similarity l2 accepted")
	}
	if entries, _ := os.ReadDir(filepath.Dir(empty)); len(entries) != 0 {
		t.Fatalf("failed export left %d entries", len(entries))
	}
	if err := WriteBiEncoder(empty, m, tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
}
