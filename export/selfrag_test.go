package export

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// selfragRun saves a fake selfrag run into a new directory: a tiny GPT-2 reader over the
// tokenizer's vocabulary plus <ctx>, </ctx>, grown by the seven reflection tokens when grown
// is set (model.GrowVocab, as experiment/selfrag/selfrag.go does), and an untrained bow bi-encoder over
// the plain vocabulary. It returns the run directory, the reader and its tokenizer.
func selfragRun(t *testing.T, grown bool) (string, *model.Reader, *tokenize.Tokenizer) {
	t.Helper()
	tok := tinyTokenizer(t)
	if _, err := tok.AddSpecialTokens([]string{"<ctx>", "</ctx>"}); err != nil {
		t.Fatal(err)
	}
	plainVocab := tok.VocabSize()
	rd := tinyReader(t, tok, 1)
	phase := "reader_finetune"
	if grown {
		if _, err := tok.AddSpecialTokens(tokenize.ReflectionTokens()); err != nil {
			t.Fatal(err)
		}
		var err error
		if rd, err = model.GrowVocab(rd, tok.VocabSize(), 9); err != nil {
			t.Fatal(err)
		}
		// The new rows are the mean of the old ones; make them distinct so that a row
		// landing at the wrong id would show.
		w := rd.Param("reader.embeddings.word").Value.Data().([]float32)
		for id := plainVocab; id < tok.VocabSize(); id++ {
			w[id*16+id%16] += float32(id) / 100
		}
		phase = "selfrag_finetune"
	}
	enc := tinyModel(t, tinyConfig(model.EncoderBow, plainVocab), true, 3)
	var ts []checkpoints.Tensor
	for _, p := range append(rd.Params(), enc.Params()...) {
		ts = append(ts, checkpoints.Tensor{Name: p.Name, Shape: slices.Clone([]int(p.Value.Shape())),
			Data: slices.Clone(p.Value.Data().([]float32))})
	}
	tokPath := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := tok.Save(tokPath); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(t.TempDir(), "selfrag-run")
	cfg := model.RAGConfig{Kind: KindSelfRAG, Reader: rd.Cfg, Encoder: enc.Cfg, SharedTowers: true, Similarity: "cosine",
		Temperature: 0.05, MaxLength: 16, ReaderMaxLength: 20}
	if err := checkpoints.Save(run, &checkpoints.Checkpoint{Params: ts, Config: cfg, TokenizerPath: tokPath,
		Trainer: checkpoints.TrainerState{Phase: phase, Step: 7}}); err != nil {
		t.Fatal(err)
	}
	return run, rd, tok
}

// TestSelfRAGExportRoundTrip: a selfrag run's grown reader exports as GPT-2 with the reflection
// tokens as added special tokens at their ids in every tokenizer file and in ragtrain.json and
// README.md, config.json's vocab_size the grown one; OpenReader/Init read it back bit for bit
// with the same reflection ids, from the export and from the run itself; a reader of the plain
// vocabulary is refused naming transformer.wte.weight and both shapes.
func TestSelfRAGExportRoundTrip(t *testing.T) {
	run, src, tok := selfragRun(t, true)
	out := filepath.Join(t.TempDir(), "export")
	if err := Export(run, out, Options{}); err != nil {
		t.Fatal(err)
	}
	var want []TokenID
	for _, name := range tokenize.ReflectionTokens() {
		id, ok := tok.ID(name)
		if !ok {
			t.Fatalf("tokenizer lacks %s", name)
		}
		want = append(want, TokenID{Token: name, ID: id})
	}
	V := tok.VocabSize()
	if want[0].ID != V-7 || want[6].ID != V-1 {
		t.Fatalf("reflection ids %v, want the last 7 of %d", want, V)
	}

	var man ReaderManifest
	if err := readJSON(filepath.Join(out, ManifestFile), &man, true); err != nil {
		t.Fatal(err)
	}
	if man.Kind != KindSelfRAG || !slices.Equal(man.ReflectionTokens, want) || man.Retriever != "" || man.Decoding == nil ||
		man.Decoding.TopK != 3 || man.Source == nil || man.Source.Phase != "selfrag_finetune" || man.Source.Step != 7 {
		t.Errorf("ragtrain.json %+v", man)
	}
	var cfg map[string]any
	if err := readJSON(filepath.Join(out, ConfigFile), &cfg, false); err != nil {
		t.Fatal(err)
	}
	if cfg["vocab_size"] != float64(V) || cfg["model_type"] != "gpt2" {
		t.Errorf("config.json vocab_size %v model_type %v, want %d gpt2", cfg["vocab_size"], cfg["model_type"], V)
	}
	back, err := tokenize.Load(filepath.Join(out, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	var tc readerTokenizerConfig
	if err := readJSON(filepath.Join(out, TokenizerConfigFile), &tc, true); err != nil {
		t.Fatal(err)
	}
	var sp readerSpecialTokens
	if err := readJSON(filepath.Join(out, SpecialTokensFile), &sp, true); err != nil {
		t.Fatal(err)
	}
	added, err := readAddedTokens(filepath.Join(out, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	readme, _ := os.ReadFile(filepath.Join(out, ReadmeFile))
	for _, w := range want {
		if id, ok := back.ID(w.Token); !ok || id != w.ID || back.VocabSize() != V {
			t.Errorf("tokenizer.json: %s at %d (%v), want %d", w.Token, id, ok, w.ID)
		}
		if ids := back.Encode("x " + w.Token + " y"); !slices.Contains(ids, w.ID) {
			t.Errorf("tokenizer.json encodes %s as %v, not one token %d", w.Token, ids, w.ID)
		}
		if !slices.Contains(added, savedAddedToken{ID: w.ID, Content: w.Token, Special: true}) {
			t.Errorf("tokenizer.json added_tokens lacks %s at %d as special: %+v", w.Token, w.ID, added)
		}
		if d := tc.AddedTokensDecoder[fmt.Sprint(w.ID)]; d.Content != w.Token || !d.Special {
			t.Errorf("tokenizer_config.json added_tokens_decoder[%d] = %+v, want %s", w.ID, d, w.Token)
		}
		if !slices.Contains(tc.AdditionalSpecialTokens, w.Token) || !slices.Contains(sp.AdditionalSpecialTokens, w.Token) {
			t.Errorf("%s not among additional_special_tokens: %v / %v", w.Token, tc.AdditionalSpecialTokens, sp.AdditionalSpecialTokens)
		}
		if row := fmt.Sprintf("| `%s` | %d |", w.Token, w.ID); !strings.Contains(string(readme), row) {
			t.Errorf("README.md lacks %q:\n%s", row, readme)
		}
	}

	// Import, from the export and from the run directory: bit-exact, same reflection ids.
	for _, dir := range []string{out, run} {
		dst := tinyReader(t, back, 5)
		d, err := InitReader(dst, dir)
		if err != nil {
			t.Fatal(err)
		}
		equalBits(t, src.Params(), dst.Params())
		if !slices.Equal(d.ReflectionTokens, want) || d.Reader != src.Cfg {
			t.Errorf("%s: opened with reflection tokens %v, config %+v", dir, d.ReflectionTokens, d.Reader)
		}
	}

	// A reader of the plain vocabulary cannot take the grown embedding matrix.
	plain, err := model.NewReader(model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: V - 7, Hidden: 16,
		Layers: 2, Heads: 4, FFN: 24, MaxPosition: 20, Dropout: 0.1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, err = InitReader(plain, out)
	var mm *MismatchError
	if !errors.As(err, &mm) || len(mm.WrongShape) != 1 || !strings.Contains(err.Error(), "transformer.wte.weight") ||
		!strings.Contains(err.Error(), fmt.Sprint([]int{V, 16})) || !strings.Contains(err.Error(), fmt.Sprint([]int{V - 7, 16})) {
		t.Errorf("plain-vocabulary reader: %v", err)
	}

	// ragtrain.json and tokenizer.json must agree on the ids.
	path := filepath.Join(out, ManifestFile)
	b, _ := os.ReadFile(path)
	from := fmt.Sprintf("\"id\": %d", want[2].ID)
	os.WriteFile(path, []byte(strings.Replace(string(b), from, fmt.Sprintf("\"id\": %d", want[2].ID+100), 1)), 0o644)
	if _, err := OpenReader(out); err == nil || !strings.Contains(err.Error(), "[Relevant]") || !strings.Contains(err.Error(), path) {
		t.Errorf("tampered reflection id: %v", err)
	}
}

// TestSelfRAGExportPlainPhase: a selfrag checkpoint saved before the reflective phase holds
// the plain reader; it exports as a plain rag reader without reflection tokens or README.md.
func TestSelfRAGExportPlainPhase(t *testing.T) {
	run, src, _ := selfragRun(t, false)
	out := filepath.Join(t.TempDir(), "export")
	if err := Export(run, out, Options{}); err != nil {
		t.Fatal(err)
	}
	var man ReaderManifest
	if err := readJSON(filepath.Join(out, ManifestFile), &man, true); err != nil {
		t.Fatal(err)
	}
	if man.Kind != KindRAG || man.ReflectionTokens != nil || man.Decoding != nil || exists(filepath.Join(out, ReadmeFile)) {
		t.Errorf("plain phase exported as %+v", man)
	}
	dst := tinyReader(t, mustLoad(t, filepath.Join(out, TokenizerFile)), 5)
	d, err := InitReader(dst, out)
	if err != nil {
		t.Fatal(err)
	}
	equalBits(t, src.Params(), dst.Params())
	if d.ReflectionTokens != nil {
		t.Errorf("reflection tokens %v", d.ReflectionTokens)
	}
}

// TestReflectionTokenIDsErrors: a tokenizer with some reflection tokens only, or one whose ids
// exceed the reader's rows, is refused naming the token.
func TestReflectionTokenIDsErrors(t *testing.T) {
	tok := tinyTokenizer(t)
	if _, err := tok.AddSpecialTokens(tokenize.ReflectionTokens()[:3]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := tok.Save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := reflectionTokenIDs(path, tok.VocabSize(), true); err == nil || !strings.Contains(err.Error(), "[Irrelevant]") {
		t.Errorf("3 of 7: %v", err)
	}
	if ids, err := reflectionTokenIDs(path, tok.VocabSize(), false); ids != nil || err != nil {
		t.Errorf("3 of 7, not strict: %v %v, want nil nil", ids, err)
	}
	tok.AddSpecialTokens(tokenize.ReflectionTokens())
	tok.Save(path)
	if _, err := reflectionTokenIDs(path, tok.VocabSize()-7, true); err == nil || !strings.Contains(err.Error(), "[Retrieve]") ||
		!strings.Contains(err.Error(), "not grown") {
		t.Errorf("ids beyond the reader: %v", err)
	}
	if ids, err := reflectionTokenIDs(path, tok.VocabSize(), true); err != nil || len(ids) != 7 {
		t.Errorf("complete: %v %v", ids, err)
	}
}

func mustLoad(t *testing.T, path string) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
