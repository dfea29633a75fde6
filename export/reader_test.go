package export

import (
	"errors"
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

// tinyReader returns a 2-layer GPT-2 reader over tok's vocabulary, with <ctx> and </ctx> added
// to tok as the rag runs add them.
func tinyReader(t *testing.T, tok *tokenize.Tokenizer, seed uint64) *model.Reader {
	t.Helper()
	rd, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16,
		Layers: 2, Heads: 4, FFN: 24, MaxPosition: 20, Dropout: 0.1}, seed)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

func readerTokenizer(t *testing.T) *tokenize.Tokenizer {
	t.Helper()
	tok := tinyTokenizer(t)
	if _, err := tok.AddSpecialTokens([]string{"<ctx>", "</ctx>", tokenize.RetrieveToken}); err != nil {
		t.Fatal(err)
	}
	return tok
}

var tinyReaderMeta = ReaderMeta{MaxLength: 20, MaxAnswerTokens: 3}

// TestReaderRoundTrip: export -> import is bit-exact for every parameter (values of every kind
// included), the files are GPT2LMHeadModel's, and config.json, generation_config.json and the
// tokenizer files say what the issue asks.
func TestReaderRoundTrip(t *testing.T) {
	tok := readerTokenizer(t)
	src := tinyReader(t, tok, 1)
	w := src.Param("reader.layer.1.attn.k.weight").Value.Data().([]float32)
	w[0], w[1], w[2], w[3] = float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, math.MaxFloat32, -1e-38
	out := filepath.Join(t.TempDir(), "reader")
	if err := WriteReader(out, src, tok, tinyReaderMeta); err != nil {
		t.Fatal(err)
	}
	dst := tinyReader(t, tok, 2)
	d, err := InitReader(dst, out)
	if err != nil {
		t.Fatal(err)
	}
	equalBits(t, src.Params(), dst.Params())
	if d.Layout != LayoutExport || d.Reader != src.Cfg || d.Tokenizer == "" || len(d.Ignored) != 0 {
		t.Errorf("opened as %+v, want the export layout of %+v", d, src.Cfg)
	}

	// Names and shapes are GPT2LMHeadModel's; lm_head.weight is tied, not written.
	raw, meta, err := checkpoints.ReadSafetensorsRaw(filepath.Join(out, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	if meta["format"] != "pt" {
		t.Errorf("metadata %v", meta)
	}
	shapes := map[string][]int{}
	for _, r := range raw {
		shapes[r.Name] = r.Shape
	}
	V := tok.VocabSize()
	for name, want := range map[string][]int{
		"transformer.wte.weight": {V, 16}, "transformer.wpe.weight": {20, 16},
		"transformer.h.0.ln_1.weight": {16}, "transformer.h.1.attn.c_attn.weight": {16, 48},
		"transformer.h.1.attn.c_attn.bias": {48}, "transformer.h.0.attn.c_proj.weight": {16, 16},
		"transformer.h.0.ln_2.bias": {16}, "transformer.h.1.mlp.c_fc.weight": {16, 24}, "transformer.h.1.mlp.c_fc.bias": {24},
		"transformer.h.0.mlp.c_proj.weight": {24, 16}, "transformer.ln_f.weight": {16}, "transformer.ln_f.bias": {16},
	} {
		if !slices.Equal(shapes[name], want) {
			t.Errorf("%s: shape %v, want %v", name, shapes[name], want)
		}
	}
	if len(raw) != 2+12*2+2 {
		t.Errorf("%d tensors, want 28", len(raw))
	}
	if _, ok := shapes["lm_head.weight"]; ok {
		t.Error("lm_head.weight written; it is tied to transformer.wte.weight")
	}
	// c_attn is Conv1D [in, out]: column H+o of row i is key weight [o, i].
	var cattn []float32
	for _, r := range raw {
		if r.Name == "transformer.h.1.attn.c_attn.weight" {
			cattn, _ = r.Float32()
		}
	}
	k := src.Param("reader.layer.1.attn.k.weight").Value.Data().([]float32)
	if got, want := cattn[3*48+16+5], k[5*16+3]; math.Float32bits(got) != math.Float32bits(want) {
		t.Errorf("c_attn[3, 16+5] = %g, want k.weight[5, 3] = %g", got, want)
	}

	var cfg map[string]any
	if err := readJSON(filepath.Join(out, ConfigFile), &cfg, false); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"model_type": "gpt2", "n_embd": 16.0, "n_layer": 2.0, "n_head": 4.0, "n_inner": 24.0, "n_positions": 20.0,
		"n_ctx": 20.0, "vocab_size": float64(V), "activation_function": "gelu", "layer_norm_epsilon": 1e-5,
		"bos_token_id": float64(tok.CLSID()), "eos_token_id": float64(tok.SEPID()), "pad_token_id": float64(tok.PadID()),
		"tie_word_embeddings": true, "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "scale_attn_weights": true,
	} {
		if cfg[key] != want {
			t.Errorf("config.json %s = %v, want %v", key, cfg[key], want)
		}
	}
	if a, _ := cfg["architectures"].([]any); len(a) != 1 || a[0] != "GPT2LMHeadModel" {
		t.Errorf("architectures %v", cfg["architectures"])
	}
	var gen map[string]any
	if err := readJSON(filepath.Join(out, GenerationConfigFile), &gen, false); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{"bos_token_id": float64(tok.CLSID()), "eos_token_id": float64(tok.SEPID()),
		"pad_token_id": float64(tok.PadID()), "max_new_tokens": 3.0, "do_sample": false} {
		if gen[key] != want {
			t.Errorf("generation_config.json %s = %v, want %v", key, gen[key], want)
		}
	}
	var sp readerSpecialTokens
	if err := readJSON(filepath.Join(out, SpecialTokensFile), &sp, true); err != nil {
		t.Fatal(err)
	}
	if sp.BosToken != "[CLS]" || sp.EosToken != "[SEP]" || sp.PadToken != "[PAD]" ||
		!slices.Equal(sp.AdditionalSpecialTokens, []string{"<ctx>", "</ctx>", tokenize.RetrieveToken}) {
		t.Errorf("special_tokens_map.json %+v", sp)
	}
	back, err := tokenize.Load(filepath.Join(out, TokenizerFile))
	if err != nil || back.VocabSize() != V {
		t.Errorf("tokenizer.json: %v, %d tokens", err, back.VocabSize())
	}
}

// rewriteSafetensors applies edit to the tensors of dir/model.safetensors.
func rewriteSafetensors(t *testing.T, dir string, edit func([]checkpoints.Tensor) []checkpoints.Tensor) {
	t.Helper()
	path := filepath.Join(dir, ModelFile)
	ts, err := readFloatTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoints.WriteSafetensors(path, edit(ts), nil); err != nil {
		t.Fatal(err)
	}
}

// TestReaderImportErrors: a wrongly shaped tensor is named with both shapes; missing and
// unexpected tensors are listed; configs GPT-2 does not compute as the reader does are refused.
func TestReaderImportErrors(t *testing.T) {
	tok := readerTokenizer(t)
	src := tinyReader(t, tok, 1)
	out := filepath.Join(t.TempDir(), "reader")
	if err := WriteReader(out, src, tok, tinyReaderMeta); err != nil {
		t.Fatal(err)
	}
	rewriteSafetensors(t, out, func(ts []checkpoints.Tensor) []checkpoints.Tensor {
		var keep []checkpoints.Tensor
		for _, x := range ts {
			switch x.Name {
			case "transformer.h.1.mlp.c_fc.weight": // [16,24] -> [16,20]
				x.Shape, x.Data = []int{16, 20}, x.Data[:16*20]
			case "transformer.ln_f.bias":
				continue
			}
			keep = append(keep, x)
		}
		return append(keep, checkpoints.Tensor{Name: "transformer.h.7.ln_1.weight", Shape: []int{16}, Data: make([]float32, 16)})
	})
	_, err := InitReader(tinyReader(t, tok, 2), out)
	var mm *MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("err = %v, want a *MismatchError", err)
	}
	msg := err.Error()
	for _, want := range []string{"transformer.h.1.mlp.c_fc.weight", "[16 20]", "[16 24]", "reader.layer.1.ffn.in.weight",
		"missing: transformer.ln_f.bias", "unexpected: transformer.h.7.ln_1.weight"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if len(mm.WrongShape) != 1 || len(mm.Missing) != 1 || len(mm.Unexpected) != 1 {
		t.Errorf("%+v", mm)
	}

	// A reader with other sizes gets the tensor-level error too; other heads a direct one.
	other, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16,
		Layers: 2, Heads: 2, FFN: 24, MaxPosition: 20}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InitReader(other, out); err == nil || !strings.Contains(err.Error(), "attention heads") {
		t.Errorf("2 heads vs 4: %v", err)
	}

	// config.json checks.
	for _, c := range []struct{ from, to, want string }{
		{`"activation_function": "gelu"`, `"activation_function": "gelu_new"`, `activation_function = "gelu_new"`},
		{`"layer_norm_epsilon": 0.00001`, `"layer_norm_epsilon": 1e-12`, "layer_norm_epsilon = 1e-12"},
		{`"tie_word_embeddings": true`, `"tie_word_embeddings": false`, "tie_word_embeddings = false"},
		{`"model_type": "gpt2"`, `"model_type": "bert"`, `model_type "bert"`},
	} {
		dir := filepath.Join(t.TempDir(), "r")
		if err := WriteReader(dir, src, tok, tinyReaderMeta); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, ConfigFile)
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), c.from) {
			t.Fatalf("config.json lacks %s:\n%s", c.from, b)
		}
		os.WriteFile(path, []byte(strings.Replace(string(b), c.from, c.to, 1)), 0o644)
		if _, err := OpenReader(dir); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want one naming %s and %q", c.to, err, path, c.want)
		}
	}
}

// TestReaderForeignGPT2: a GPT2Model-named file (no "transformer." prefix) with the attention
// mask buffers and an lm_head.weight equal to wte loads; an untied lm_head is refused.
func TestReaderForeignGPT2(t *testing.T) {
	tok := readerTokenizer(t)
	src := tinyReader(t, tok, 1)
	out := filepath.Join(t.TempDir(), "reader")
	if err := WriteReader(out, src, tok, tinyReaderMeta); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, ManifestFile))
	var wte checkpoints.Tensor
	rewriteSafetensors(t, out, func(ts []checkpoints.Tensor) []checkpoints.Tensor {
		var res []checkpoints.Tensor
		for _, x := range ts {
			if x.Name == "transformer.wte.weight" {
				wte = x
			}
			x.Name = strings.TrimPrefix(x.Name, "transformer.")
			res = append(res, x)
		}
		return append(res,
			checkpoints.Tensor{Name: "h.0.attn.bias", Shape: []int{1, 1, 20, 20}, Data: make([]float32, 400)},
			checkpoints.Tensor{Name: "lm_head.weight", Shape: wte.Shape, Data: wte.Data})
	})
	dst := tinyReader(t, tok, 2)
	d, err := InitReader(dst, out)
	if err != nil {
		t.Fatal(err)
	}
	equalBits(t, src.Params(), dst.Params())
	if d.Layout != LayoutHuggingFace || len(d.Ignored) != 2 {
		t.Errorf("layout %s, ignored %v", d.Layout, d.Ignored)
	}
	rewriteSafetensors(t, out, func(ts []checkpoints.Tensor) []checkpoints.Tensor {
		for i := range ts {
			if ts[i].Name == "lm_head.weight" {
				ts[i].Data = append([]float32(nil), ts[i].Data...)
				ts[i].Data[7]++
			}
		}
		return ts
	})
	if _, err := OpenReader(out); err == nil || !strings.Contains(err.Error(), "lm_head.weight differs") {
		t.Errorf("untied lm_head: %v", err)
	}
}
