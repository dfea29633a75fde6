package export

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
)

// writeTinyBody writes a tiny shared-tower transformer bi-encoder with WriteBiEncoder (every
// parameter a distinct random value) and returns it with its directory.
func writeTinyBody(t *testing.T) (*model.BiEncoder, string) {
	t.Helper()
	tok := tinyTokenizer(t)
	bi := tinyModel(t, tinyConfig(model.EncoderTransformer, tok.VocabSize()), true, 3)
	randomise(bi.Params(), 11)
	dir := filepath.Join(t.TempDir(), "body")
	if err := WriteBiEncoder(dir, bi, tok, BiEncoderMeta{Similarity: "cosine", Temperature: 0.05, MaxLength: 20}); err != nil {
		t.Fatal(err)
	}
	return bi, dir
}

// randomise fills every parameter with N(0, 1) draws of a PCG seeded with seed.
func randomise(ps []*model.Param, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range ps {
		d := p.Value.Data().([]float32)
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
	}
}

// bitsEqual reports the first index where a and b differ bitwise, or -1.
func bitsEqual(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// checkBodyInit checks a cross-encoder initialised from the body bi: every encoder parameter is
// the bi-encoder tower's bit for bit, the pooler is pooler (nil: the seed's draw) and the
// classifier is the seed's draw.
func checkBodyInit(t *testing.T, ce *model.CrossEncoder, bi *model.BiEncoder, pooler map[string][]float32, seed uint64) {
	t.Helper()
	seedModel, err := model.NewCrossEncoder(ce.Cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bi.Query.Params() {
		q := ce.Param(p.Name)
		if q == nil {
			t.Fatalf("the cross-encoder has no parameter %s", p.Name)
		}
		if i := bitsEqual(q.Value.Data().([]float32), p.Value.Data().([]float32)); i >= 0 {
			t.Fatalf("%s[%d]: %v, the body's %v", p.Name, i, q.Value.Data().([]float32)[i], p.Value.Data().([]float32)[i])
		}
	}
	for _, n := range []string{model.PoolerWeight, model.PoolerBias, model.ClassifierWeight, model.ClassifierBias} {
		want := seedModel.Param(n).Value.Data().([]float32)
		if w, ok := pooler[n]; ok {
			want = w
		}
		got := ce.Param(n).Value.Data().([]float32)
		if i := bitsEqual(got, want); i >= 0 {
			t.Errorf("%s[%d]: %v, want %v", n, i, got[i], want[i])
		}
	}
}

// TestCrossEncoderFromBiEncoderExport: a bi-encoder export (one shared BERT tower, no pooler)
// opens as a body; Init copies the tower bit for bit and leaves the pooler and the classifier
// as the seed drew them, naming them in Fresh.
func TestCrossEncoderFromBiEncoderExport(t *testing.T) {
	bi, dir := writeTinyBody(t)
	d, err := OpenCrossEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Body || d.Layout != LayoutExport || d.Tokenizer != filepath.Join(dir, TokenizerFile) || d.MaxLength != 0 {
		t.Errorf("opened %+v", d)
	}
	if want := []string{model.PoolerWeight, model.PoolerBias, model.ClassifierWeight, model.ClassifierBias}; !slices.Equal(d.Fresh, want) {
		t.Errorf("Fresh = %v, want %v", d.Fresh, want)
	}
	if d.Encoder.Hidden != 16 || d.Encoder.Layers != 2 || d.Encoder.Heads != 4 || d.Encoder.FFN != 24 || d.Encoder.MaxPosition != 20 || d.Encoder.Pooling != model.PoolingCLS {
		t.Errorf("architecture %+v", d.Encoder)
	}
	ce, err := model.NewCrossEncoder(bi.Cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Init(ce); err != nil {
		t.Fatal(err)
	}
	checkBodyInit(t, ce, bi, nil, 9)
}

// TestCrossEncoderFromBertModelDir: a plain Hugging Face BERT directory (config.json and
// model.safetensors with BertModel names, plus pooler.dense.* as BertModel saves it, as
// all-MiniLM-L6-v2 ships) opens as a body whose pooler is read; with the "bert." prefix and
// pre-training heads of a BertForPreTraining checkpoint too (cls.* is skipped and listed).
func TestCrossEncoderFromBertModelDir(t *testing.T) {
	for _, prefix := range []string{"", "bert."} {
		bi, dir := writeTinyBody(t)
		if err := os.Remove(filepath.Join(dir, ManifestFile)); err != nil {
			t.Fatal(err)
		}
		pw, pb := make([]float32, 16*16), make([]float32, 16)
		for i := range pw {
			pw[i] = float32(i)/100 - 1
		}
		for i := range pb {
			pb[i] = float32(i) / 7
		}
		rewriteModel(t, dir, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
			for i := range raw {
				raw[i].Name = prefix + raw[i].Name
			}
			raw = append(raw, checkpoints.F32Raw(checkpoints.Tensor{Name: prefix + "pooler.dense.weight", Shape: []int{16, 16}, Data: pw}),
				checkpoints.F32Raw(checkpoints.Tensor{Name: prefix + "pooler.dense.bias", Shape: []int{16}, Data: pb}))
			if prefix != "" {
				raw = append(raw, checkpoints.F32Raw(checkpoints.Tensor{Name: "cls.predictions.bias", Shape: []int{3}, Data: make([]float32, 3)}))
			}
			return raw
		})
		d, err := OpenCrossEncoder(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Body || d.Layout != LayoutHuggingFace {
			t.Errorf("%q: opened %+v", prefix, d)
		}
		if want := []string{model.ClassifierWeight, model.ClassifierBias}; !slices.Equal(d.Fresh, want) {
			t.Errorf("%q: Fresh = %v, want %v", prefix, d.Fresh, want)
		}
		wantIgnored := 0
		if prefix != "" {
			wantIgnored = 1
		}
		if len(d.Ignored) != wantIgnored || (wantIgnored == 1 && d.Ignored[0] != filepath.Join(dir, ModelFile)+": cls.predictions.bias") {
			t.Errorf("%q: Ignored = %v", prefix, d.Ignored)
		}
		ce, err := model.NewCrossEncoder(bi.Cfg, 9)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Init(ce); err != nil {
			t.Fatalf("%q: %v", prefix, err)
		}
		checkBodyInit(t, ce, bi, map[string][]float32{model.PoolerWeight: pw, model.PoolerBias: pb}, 9)
	}
}

// TestCrossEncoderBodyMismatch: a body tensor of the wrong shape, and a body for another
// number of layers, are named in the *MismatchError with the file and both shapes.
func TestCrossEncoderBodyMismatch(t *testing.T) {
	bi, dir := writeTinyBody(t)
	path := filepath.Join(dir, ModelFile)
	rewriteModel(t, dir, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		for i := range raw {
			if raw[i].Name == "encoder.layer.1.intermediate.dense.weight" {
				raw[i].Shape = []int{16, 24} // same bytes, transposed shape
			}
		}
		return raw
	})
	ce, err := model.NewCrossEncoder(bi.Cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	_, err = InitCrossEncoder(ce, dir)
	var mm *MismatchError
	if !errors.As(err, &mm) || len(mm.WrongShape) != 1 || len(mm.Missing) != 0 || len(mm.Unexpected) != 0 {
		t.Fatalf("err = %v", err)
	}
	if want := "wrong shape: encoder.layer.1.intermediate.dense.weight in " + path + " is [16 24], parameter encoder.layer.1.ffn.in.weight is [24 16]"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}

	// A model with three layers misses the third layer's tensors.
	cfg := bi.Cfg
	cfg.Layers = 3
	ce3, err := model.NewCrossEncoder(cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	_, err = InitCrossEncoder(ce3, dir)
	if !errors.As(err, &mm) || len(mm.Missing) != 16 || !strings.Contains(err.Error(), "missing: encoder.layer.2.attention.self.query.weight [16 16] for parameter encoder.layer.2.attn.q.weight") {
		t.Fatalf("three layers: err = %v", err)
	}
}

// TestCrossEncoderBodySeparateTowers: a bi-encoder with separate towers names the problem.
func TestCrossEncoderBodySeparateTowers(t *testing.T) {
	tok := tinyTokenizer(t)
	bi := tinyModel(t, tinyConfig(model.EncoderTransformer, tok.VocabSize()), false, 3)
	dir := filepath.Join(t.TempDir(), "two")
	if err := WriteBiEncoder(dir, bi, tok, BiEncoderMeta{Similarity: "dot", MaxLength: 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCrossEncoder(dir); err == nil || !strings.Contains(err.Error(), "separate query and passage towers") {
		t.Fatalf("err = %v", err)
	}
	// One of its towers is a BERT directory, and a body.
	d, err := OpenCrossEncoder(filepath.Join(dir, "query"))
	if err != nil || !d.Body {
		t.Fatalf("query tower: %+v, %v", d, err)
	}
}

// TestCrossEncoderFromMiniLM opens all-MiniLM-L6-v2 (tools/pretrained/get.sh; skipped when
// pretrained/ lacks it) as a body: BertModel H 384, 6 layers, 12 heads, FFN 1536, 512
// positions, with its pooler; only the classifier is fresh.
func TestCrossEncoderFromMiniLM(t *testing.T) {
	dir := filepath.Join("..", "pretrained", "all-MiniLM-L6-v2")
	if _, err := os.Stat(filepath.Join(dir, ModelFile)); err != nil {
		t.Skipf("no %s: %v", dir, err)
	}
	d, err := OpenCrossEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := d.Encoder
	if !d.Body || e.Vocab != 30522 || e.Hidden != 384 || e.Layers != 6 || e.Heads != 12 || e.FFN != 1536 || e.MaxPosition != 512 {
		t.Errorf("opened %+v", d)
	}
	if want := []string{model.ClassifierWeight, model.ClassifierBias}; !slices.Equal(d.Fresh, want) {
		t.Errorf("Fresh = %v, want %v", d.Fresh, want)
	}
	ce, err := model.NewCrossEncoder(e, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Init(ce); err != nil {
		t.Fatal(err)
	}
	raw, _, err := checkpoints.ReadSafetensorsRaw(filepath.Join(dir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range raw {
		param := map[string]string{"pooler.dense.weight": model.PoolerWeight, "embeddings.word_embeddings.weight": "encoder.embeddings.word",
			"encoder.layer.5.output.LayerNorm.bias": "encoder.layer.5.ffn.norm.bias"}[r.Name]
		if param == "" {
			continue
		}
		want, err := r.Float32()
		if err != nil {
			t.Fatal(err)
		}
		if i := bitsEqual(ce.Param(param).Value.Data().([]float32), want); i >= 0 {
			t.Errorf("%s[%d] differs from %s", param, i, r.Name)
		}
	}
}
