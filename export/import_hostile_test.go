package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/memcheck"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// hfBertDir writes a plain Hugging Face BERT directory (config.json, model.safetensors,
// tokenizer.json, sentence-transformers files) of a tiny transformer.
func hfBertDir(t *testing.T) (string, *model.BiEncoder) {
	t.Helper()
	tok := tinyTokenizer(t)
	src := tinyModel(t, tinyConfig(model.EncoderTransformer, tok.VocabSize()), true, 1)
	out := filepath.Join(t.TempDir(), "bert")
	if err := WriteBiEncoder(out, src, tok, tinyMeta); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, ManifestFile))
	return out, src
}

// TestImportDuplicateAfterPrefix: issue 19's model.safetensors holding both
// bert.embeddings.word_embeddings.weight and embeddings.word_embeddings.weight used to lose one
// of them silently; now it is an error naming both.
func TestImportDuplicateAfterPrefix(t *testing.T) {
	dir, src := hfBertDir(t)
	rewriteModel(t, dir, func(raw []checkpoints.RawTensor) []checkpoints.RawTensor {
		var extra checkpoints.RawTensor
		for i := range raw {
			if raw[i].Name == "embeddings.word_embeddings.weight" {
				extra = raw[i]
			}
			raw[i].Name = "bert." + raw[i].Name
		}
		return append(raw, extra)
	})
	dst := tinyModel(t, src.Cfg, true, 2)
	var err error
	memcheck.Bounded(t, "duplicate after stripping", func() { _, err = InitBiEncoder(dst, dir) })
	want := `tensors "bert.embeddings.word_embeddings.weight" and "embeddings.word_embeddings.weight" are both "embeddings.word_embeddings.weight" once the "bert." prefix is removed`
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, ModelFile)) || !strings.Contains(err.Error(), want) {
		t.Errorf("duplicate after stripping: %v, want %q", err, want)
	}
}

// TestImportSentenceTransformersValues: similarity_fn_name and max_seq_length must be values
// this toolkit uses.
func TestImportSentenceTransformersValues(t *testing.T) {
	dir, _ := hfBertDir(t)
	d, err := OpenBiEncoder(dir)
	if err != nil || d.Similarity != "cosine" || d.MaxLength != 16 {
		t.Fatalf("the written directory: %+v, %v", d, err)
	}
	st, sb := filepath.Join(dir, STConfigFile), filepath.Join(dir, SentenceBertFile)
	stData, _ := os.ReadFile(st)
	sbData, _ := os.ReadFile(sb)
	for _, c := range []struct {
		file, from, to, want string
	}{
		{st, `"cosine"`, `"euclidean"`, st + `: similarity_fn_name = "euclidean"; this toolkit scores by "cosine" or "dot"`},
		{st, `"cosine"`, `"manhattan"`, `similarity_fn_name = "manhattan"`},
		{sb, `16`, `-7`, sb + `: max_seq_length = -7, want a length >= 1`},
		{sb, `16`, `0`, `max_seq_length = 0, want a length >= 1`},
	} {
		os.WriteFile(st, stData, 0o644)
		os.WriteFile(sb, sbData, 0o644)
		b, _ := os.ReadFile(c.file)
		if !strings.Contains(string(b), c.from) {
			t.Fatalf("%s lacks %s", c.file, c.from)
		}
		os.WriteFile(c.file, []byte(strings.Replace(string(b), c.from, c.to, 1)), 0o644)
		var err error
		memcheck.Bounded(t, c.to, func() { _, err = OpenBiEncoder(dir) })
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", c.to, err, c.want)
		}
	}
	// "dot" and a null max_seq_length are accepted; the length is then sentence-transformers':
	// tokenizer_config.json's model_max_length (16) capped at max_position_embeddings (20).
	os.WriteFile(st, []byte(strings.Replace(string(stData), `"cosine"`, `"dot"`, 1)), 0o644)
	os.WriteFile(sb, []byte(strings.Replace(string(sbData), `16`, `null`, 1)), 0o644)
	if d, err := OpenBiEncoder(dir); err != nil || d.Similarity != "dot" || d.MaxLength != 16 {
		t.Errorf("dot, null: %+v, %v", d, err)
	}
	tc := filepath.Join(dir, TokenizerConfigFile)
	tcData, _ := os.ReadFile(tc)
	if !strings.Contains(string(tcData), `"model_max_length": 16`) {
		t.Fatalf("%s lacks model_max_length 16", tc)
	}
	for _, c := range []struct {
		value string
		want  int
	}{{`1000000000000000019884624838656`, 20}, {`12`, 12}} {
		os.WriteFile(tc, []byte(strings.Replace(string(tcData), `"model_max_length": 16`, `"model_max_length": `+c.value, 1)), 0o644)
		if d, err := OpenBiEncoder(dir); err != nil || d.MaxLength != c.want {
			t.Errorf("model_max_length %s: %+v, %v; want MaxLength %d", c.value, d, err, c.want)
		}
	}
	os.WriteFile(tc, []byte(strings.Replace(string(tcData), `"model_max_length": 16`, `"model_max_length": 0`, 1)), 0o644)
	if _, err := OpenBiEncoder(dir); err == nil || !strings.Contains(err.Error(), tc+": model_max_length = 0, want a length >= 1") {
		t.Errorf("model_max_length 0: %v", err)
	}
}

// TestReflectionTokenNegativeID: a reflection token with a negative id is refused, naming it.
func TestReflectionTokenNegativeID(t *testing.T) {
	name := tokenize.ReflectionTokens()[0]
	path := filepath.Join(t.TempDir(), TokenizerFile)
	mustWrite(t, path, []byte(`{"added_tokens":[{"id":-1,"content":"`+name+`","special":true}]}`))
	for _, strict := range []bool{false, true} {
		if _, err := reflectionTokenIDs(path, 10, strict); err == nil || !strings.Contains(err.Error(), path+": the reflection token "+name+" has negative id -1") {
			t.Errorf("strict %v: %v", strict, err)
		}
	}
}
