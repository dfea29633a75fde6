package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/internal/memcheck"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// writeModules writes dir/modules.json.
func writeModules(t *testing.T, dir string, mods []stModule) {
	t.Helper()
	b, err := json.Marshal(mods)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, ModulesFile), b)
}

// oneLineError fails unless err is one line containing each of want.
func oneLineError(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("%s: %v, want one line containing %q", what, err, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want one line containing %q", what, err, w)
		}
	}
}

const (
	stTransformer = "sentence_transformers.models.Transformer"
	stPoolingType = "sentence_transformers.models.Pooling"
	stNormalize   = "sentence_transformers.models.Normalize"
)

// TestExportNormalize: a cosine export ends its sentence-transformers pipeline with a Normalize
// module (modules.json entry 2, an empty 2_Normalize/) and reads back with Normalize set; a dot
// export has two modules, no 2_Normalize/, and Normalize unset. Both initialise a model bit for
// bit, with shared and with separate towers.
func TestExportNormalize(t *testing.T) {
	tok := tinyTokenizer(t)
	cfg := tinyConfig(model.EncoderTransformer, tok.VocabSize())
	for _, shared := range []bool{true, false} {
		for _, sim := range []string{"cosine", "dot"} {
			src := tinyModel(t, cfg, shared, 1)
			out := filepath.Join(t.TempDir(), "x")
			if err := WriteBiEncoder(out, src, tok, BiEncoderMeta{Similarity: sim, MaxLength: 16}); err != nil {
				t.Fatal(err)
			}
			tower := out
			if !shared {
				tower = filepath.Join(out, "query")
			}
			var mods []stModule
			if err := readJSON(filepath.Join(tower, ModulesFile), &mods, true); err != nil {
				t.Fatal(err)
			}
			entries, statErr := os.ReadDir(filepath.Join(tower, NormalizeDir))
			if sim == "cosine" {
				want := stModule{Idx: 2, Name: "2", Path: "2_Normalize", Type: stNormalize}
				if len(mods) != 3 || mods[2] != want {
					t.Errorf("shared %v cosine: modules.json %+v, want a third module %+v", shared, mods, want)
				}
				if statErr != nil || len(entries) != 0 {
					t.Errorf("shared %v cosine: 2_Normalize/ holds %v (%v), want an empty directory", shared, entries, statErr)
				}
			} else if len(mods) != 2 || statErr == nil {
				t.Errorf("shared %v dot: modules.json %+v, 2_Normalize/ present = %v", shared, mods, statErr == nil)
			}
			dst := tinyModel(t, cfg, shared, 2)
			d, err := InitBiEncoder(dst, out)
			if err != nil {
				t.Fatal(err)
			}
			if d.Normalize != (sim == "cosine") || d.Similarity != sim {
				t.Errorf("shared %v %s: read back Normalize %v, similarity %q", shared, sim, d.Normalize, d.Similarity)
			}
			equalBits(t, src.Params(), dst.Params())
			// The tower directory alone (a sentence-transformers directory) says the same.
			os.Remove(filepath.Join(out, ManifestFile))
			if dt, err := OpenBiEncoder(tower); err != nil || dt.Normalize != (sim == "cosine") || dt.Similarity != sim || dt.Layout != LayoutHuggingFace {
				t.Errorf("shared %v %s: the tower directory: %+v, %v", shared, sim, dt, err)
			}
		}
	}
}

// TestImportModules: modules.json as sentence-transformers 2 and 6 write it, a Transformer in a
// subdirectory, a Pooling module elsewhere than 1_Pooling in both config formats, the default
// similarity; and each pipeline this toolkit does not compute, refused naming the file.
func TestImportModules(t *testing.T) {
	dir, src := hfBertDir(t) // cls pooling, cosine, max length 16, with Normalize
	base := []stModule{{0, "0", "", stTransformer}, {1, "1", "1_Pooling", stPoolingType}, {2, "2", "2_Normalize", stNormalize}}
	st6 := []stModule{{0, "0", "", "sentence_transformers.base.modules.transformer.Transformer"},
		{1, "1", "pool", "sentence_transformers.sentence_transformer.modules.pooling.Pooling"},
		{2, "2", "2_Normalize", "sentence_transformers.base.modules.normalize.Normalize"}}
	modulesPath, stPath := filepath.Join(dir, ModulesFile), filepath.Join(dir, STConfigFile)
	stData, _ := os.ReadFile(stPath)
	os.MkdirAll(filepath.Join(dir, "pool"), 0o755)
	poolPath := filepath.Join(dir, "pool", ConfigFile)

	open := func(what string) *BiEncoderDir {
		t.Helper()
		d, err := OpenBiEncoder(dir)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := d.Init(tinyModel(t, src.Cfg, true, 3)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return d
	}
	// sentence-transformers 6: new type names, pooling_mode, embedding_dimension, no
	// max_seq_length (then model_max_length 16 of tokenizer_config.json), no Normalize directory.
	writeModules(t, dir, st6)
	mustWrite(t, poolPath, []byte(`{"embedding_dimension": 16, "pooling_mode": "mean", "include_prompt": true}`))
	sb := filepath.Join(dir, SentenceBertFile)
	mustWrite(t, sb, []byte(`{"transformer_task": "feature-extraction", "module_output_name": "token_embeddings"}`))
	os.Remove(filepath.Join(dir, NormalizeDir))
	if d := open("st6"); d.Encoder.Pooling != model.PoolingMean || !d.Normalize || d.Similarity != "cosine" || d.MaxLength != 16 {
		t.Errorf("st6: pooling %q, normalize %v, similarity %q, max length %d", d.Encoder.Pooling, d.Normalize, d.Similarity, d.MaxLength)
	}
	for _, mode := range []string{`"cls"`, `["cls"]`} {
		mustWrite(t, poolPath, []byte(`{"embedding_dimension": 16, "pooling_mode": `+mode+`}`))
		if d := open(mode); d.Encoder.Pooling != model.PoolingCLS {
			t.Errorf("pooling_mode %s: pooling %q", mode, d.Encoder.Pooling)
		}
	}
	// Without Normalize; similarity_fn_name absent means cosine, so does no such file at all
	// next to modules.json.
	writeModules(t, dir, base[:2])
	mustWrite(t, stPath, []byte(`{"__version__": {"sentence_transformers": "2.0.0"}}`))
	if d := open("no normalize"); d.Normalize || d.Similarity != "cosine" || d.Encoder.Pooling != model.PoolingCLS {
		t.Errorf("no normalize: normalize %v, similarity %q, pooling %q", d.Normalize, d.Similarity, d.Encoder.Pooling)
	}
	os.Remove(stPath)
	if d := open("no st config"); d.Similarity != "cosine" {
		t.Errorf("no config_sentence_transformers.json: similarity %q", d.Similarity)
	}
	mustWrite(t, stPath, stData)

	// The Transformer in a subdirectory, as sentence-transformers 0.x/1.x saved it (0_Transformer/).
	sub := filepath.Join(dir, "0_Transformer")
	os.MkdirAll(sub, 0o755)
	for _, f := range []string{ConfigFile, ModelFile, TokenizerFile, TokenizerConfigFile, SpecialTokensFile, SentenceBertFile} {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(sub, f)); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(sub, SentenceBertFile), []byte(`{"max_seq_length": 12}`))
	writeModules(t, dir, []stModule{{0, "0", "0_Transformer", stTransformer}, base[1], base[2]})
	d := open("subdirectory")
	if d.Tokenizer != filepath.Join(sub, TokenizerFile) || d.MaxLength != 12 || !d.Normalize {
		t.Errorf("subdirectory: tokenizer %q, max length %d, normalize %v", d.Tokenizer, d.MaxLength, d.Normalize)
	}
	if _, what, err := d.LoadTokenizer(); err != nil || what != filepath.Join(sub, TokenizerFile) {
		t.Errorf("subdirectory tokenizer: %q, %v", what, err)
	}
	for _, f := range []string{ConfigFile, ModelFile, TokenizerFile, TokenizerConfigFile, SpecialTokensFile, SentenceBertFile} {
		os.Rename(filepath.Join(sub, f), filepath.Join(dir, f))
	}

	const computes = "this toolkit computes Transformer + Pooling (+ Normalize)"
	for _, c := range []struct {
		name string
		mods []stModule
		want []string
	}{
		{"dense", append(slices.Clone(base), stModule{3, "3", "3_Dense", "sentence_transformers.models.Dense"}),
			[]string{modulesPath + `: module 3 (name "3", path "3_Dense") is "sentence_transformers.models.Dense"; ` + computes}},
		{"layernorm", []stModule{base[0], base[1], {2, "2", "2_LayerNorm", "sentence_transformers.models.LayerNorm"}},
			[]string{`module 2 (name "2", path "2_LayerNorm") is "sentence_transformers.models.LayerNorm"`, computes, "module 2 must be a Normalize module"}},
		{"dense before pooling", []stModule{base[0], {1, "1", "1_Dense", "sentence_transformers.models.Dense"}, base[1]},
			[]string{`module 1 (name "1", path "1_Dense")`, "module 1 must be a Pooling module"}},
		{"custom", []stModule{{0, "0", "", "my_package.MyTransformer"}, base[1]}, []string{`module 0 (name "0", path "") is "my_package.MyTransformer"`}},
		{"normalize first", []stModule{base[0], base[2], base[1]}, []string{`is "` + stNormalize + `"`, "module 1 must be a Pooling module"}},
		{"transformer only", base[:1], []string{modulesPath + ": 1 modules; " + computes}},
		{"empty", []stModule{}, []string{modulesPath + ": 0 modules"}},
		{"outside", []stModule{{0, "0", "../elsewhere", stTransformer}, base[1]}, []string{`the Transformer module's path "../elsewhere" is not a directory inside`}},
		{"absolute pooling", []stModule{base[0], {1, "1", "/tmp", stPoolingType}}, []string{`the Pooling module's path "/tmp" is not a subdirectory`}},
		{"pooling without config", []stModule{base[0], {1, "1", "nowhere", stPoolingType}},
			[]string{`the Pooling module (path "nowhere") has no ` + filepath.Join(dir, "nowhere", ConfigFile)}},
	} {
		writeModules(t, dir, c.mods)
		var err error
		memcheck.Bounded(t, c.name, func() { _, err = OpenBiEncoder(dir) })
		oneLineError(t, c.name, err, c.want...)
	}

	// Pooling modes this toolkit does not compute, named with the file.
	writeModules(t, dir, st6)
	const pools = `this toolkit pools by "mean" (pooling_mode_mean_tokens) or "cls" (pooling_mode_cls_token)`
	for _, c := range []struct{ config, want string }{
		{`{"pooling_mode": "max"}`, `pooling mode "max" (pooling_mode = "max"); ` + pools},
		{`{"pooling_mode": "mean_sqrt_len_tokens"}`, `pooling mode "mean_sqrt_len_tokens" (pooling_mode = "mean_sqrt_len_tokens")`},
		{`{"pooling_mode": "weightedmean"}`, `pooling mode "weightedmean"`},
		{`{"pooling_mode": "lasttoken"}`, `pooling mode "lasttoken"`},
		{`{"pooling_mode": ["mean", "max"]}`, `2 pooling modes concatenated (pooling_mode ["mean"], pooling_mode ["max"])`},
		{`{"pooling_mode": 3}`, `pooling_mode = 3, want a mode name or a list of them`},
		{`{"pooling_mode_max_tokens": true, "pooling_mode_mean_tokens": false}`, `pooling mode "max" (pooling_mode_max_tokens = true); ` + pools},
		{`{"pooling_mode_mean_sqrt_len_tokens": true}`, `pooling mode "mean_sqrt_len_tokens" (pooling_mode_mean_sqrt_len_tokens = true)`},
		{`{"pooling_mode_weightedmean_tokens": true}`, `pooling mode "weightedmean" (pooling_mode_weightedmean_tokens = true)`},
		{`{"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": true}`, `2 pooling modes concatenated (pooling_mode_cls_token = true, pooling_mode_mean_tokens = true)`},
		{`{"pooling_mode_mean_tokens": false}`, `no pooling mode`},
		{`{"pooling_mode": "mean", "embedding_dimension": 384}`, `embedding_dimension = 384, but the transformer's hidden_size is 16`},
		{`{"pooling_mode_mean_tokens": true, "word_embedding_dimension": 8}`, `word_embedding_dimension = 8, but the transformer's hidden_size is 16`},
	} {
		mustWrite(t, poolPath, []byte(c.config))
		_, err := OpenBiEncoder(dir)
		oneLineError(t, c.config, err, poolPath+": "+c.want)
	}
}

// TestBertConfigRefused: every config.json value this toolkit's transformer does not compute is
// one error naming the file, the field, its value and what is computed; the defaults of absent
// fields are accepted.
func TestBertConfigRefused(t *testing.T) {
	dir, src := hfBertDir(t)
	cfgPath := filepath.Join(dir, ConfigFile)
	orig := readMap(t, cfgPath)
	const computes = ", but this toolkit's transformer computes "
	for _, c := range []struct {
		field string
		value any
		want  string
	}{
		{"hidden_act", "gelu_new", `hidden_act = "gelu_new"` + computes + `"gelu" (the exact erf GELU)`},
		{"hidden_act", "gelu_pytorch_tanh", `hidden_act = "gelu_pytorch_tanh"` + computes},
		{"hidden_act", "relu", `hidden_act = "relu"` + computes},
		{"position_embedding_type", "relative_key", `position_embedding_type = "relative_key"` + computes + `"absolute" position embeddings`},
		{"position_embedding_type", "relative_key_query", `position_embedding_type = "relative_key_query"`},
		{"type_vocab_size", 1, `type_vocab_size = 1` + computes + `2 token types`},
		{"type_vocab_size", 3, `type_vocab_size = 3`},
		{"layer_norm_eps", 1e-5, `layer_norm_eps = 1e-05` + computes + `LayerNorm with eps 1e-12`},
		{"layer_norm_eps", 1e-6, `layer_norm_eps = 1e-06`},
		{"is_decoder", true, `is_decoder = true` + computes + `an encoder (is_decoder false)`},
		{"add_cross_attention", true, `add_cross_attention = true` + computes + `self-attention only (add_cross_attention false)`},
		{"model_type", "roberta", `model_type "roberta"; this toolkit reads "bert" (transformer) and "ragtrain-bow" (bow)`},
		{"model_type", "distilbert", `model_type "distilbert"`},
	} {
		m := copyMap(orig)
		m[c.field] = c.value
		b, _ := json.Marshal(m)
		mustWrite(t, cfgPath, b)
		_, err := OpenBiEncoder(dir)
		oneLineError(t, c.field, err, cfgPath+": "+c.want)
	}
	// Absent fields take BertConfig's defaults, which are what this toolkit computes; explicit
	// false flags are accepted.
	m := copyMap(orig)
	for _, f := range []string{"hidden_act", "position_embedding_type", "type_vocab_size", "layer_norm_eps"} {
		delete(m, f)
	}
	m["is_decoder"], m["add_cross_attention"] = false, false
	b, _ := json.Marshal(m)
	mustWrite(t, cfgPath, b)
	if _, err := InitBiEncoder(tinyModel(t, src.Cfg, true, 2), dir); err != nil {
		t.Errorf("defaults: %v", err)
	}
	// The cross-encoder reader applies the same checks.
	if _, err := (bertConfig{ModelType: "bert", IsDecoder: true}).encoderConfig("x/config.json"); err == nil || !strings.Contains(err.Error(), "x/config.json: is_decoder = true") {
		t.Errorf("encoderConfig: %v", err)
	}
}

// copyMap returns a shallow copy of m.
func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestLoadTokenizerVocabOnly: a BERT directory with vocab.txt and tokenizer_config.json but no
// tokenizer.json has Tokenizer "" and a LoadTokenizer that encodes as its tokenizer.json did; a
// directory with neither is an error naming it.
func TestLoadTokenizerVocabOnly(t *testing.T) {
	dir, _ := hfBertDir(t)
	ref, err := tokenize.Load(filepath.Join(dir, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	var vocab strings.Builder
	for id := range ref.VocabSize() {
		s, _ := ref.Token(id)
		vocab.WriteString(s + "\n")
	}
	mustWrite(t, filepath.Join(dir, tokenize.VocabFile), []byte(vocab.String()))
	d, err := OpenBiEncoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, what, err := d.LoadTokenizer()
	if err != nil || what != filepath.Join(dir, TokenizerFile) {
		t.Fatalf("with tokenizer.json: %q, %v", what, err)
	}
	os.Remove(filepath.Join(dir, TokenizerFile))
	if d, err = OpenBiEncoder(dir); err != nil || d.Tokenizer != "" {
		t.Fatalf("without tokenizer.json: %+v, %v", d, err)
	}
	tok, what, err = d.LoadTokenizer()
	if err != nil || !strings.HasPrefix(what, filepath.Join(dir, tokenize.VocabFile)+" with "+filepath.Join(dir, TokenizerConfigFile)) {
		t.Fatalf("vocab.txt: %q, %v", what, err)
	}
	for _, s := range tinyTexts {
		if a, b := ref.Encode(s), tok.Encode(s); !slices.Equal(a, b) {
			t.Errorf("%q: %v vs %v", s, a, b)
		}
	}
	os.Remove(filepath.Join(dir, tokenize.VocabFile))
	d, _ = OpenBiEncoder(dir)
	_, _, err = d.LoadTokenizer()
	oneLineError(t, "no tokenizer", err, dir+" has no tokenizer.json and no vocab.txt")
}

// pretrainedDir returns the directory of a checkpoint fetched by tools/pretrained/get.sh:
// $RAGTRAIN_PRETRAINED/name, else <repo>/pretrained/name; the test is skipped when it is absent.
func pretrainedDir(t *testing.T, name string) string {
	t.Helper()
	root := os.Getenv("RAGTRAIN_PRETRAINED")
	if root == "" {
		root = "../pretrained"
	}
	dir, err := filepath.Abs(filepath.Join(root, name)) // absolute: tests symlink its files
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ConfigFile)); err != nil {
		t.Skipf("%s is absent (bash tools/pretrained/get.sh %s, or set RAGTRAIN_PRETRAINED)", dir, name)
	}
	return dir
}

// TestOpenMiniLM: all-MiniLM-L6-v2 as distributed (modules.json with Normalize and no
// 2_Normalize/, config_sentence_transformers.json without similarity_fn_name, max_seq_length
// 256, mean pooling) opens as such; without its tokenizer.json, its vocab.txt gives the same
// tokenizer.
func TestOpenMiniLM(t *testing.T) {
	src := pretrainedDir(t, "all-MiniLM-L6-v2")
	d, err := OpenBiEncoder(src)
	if err != nil {
		t.Fatal(err)
	}
	want := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: 30522, Hidden: 384, Layers: 6, Heads: 12, FFN: 1536,
		MaxPosition: 512, Dropout: 0.1, Pooling: model.PoolingMean}
	if d.Encoder != want || !d.Normalize || d.Similarity != "cosine" || d.MaxLength != 256 || d.Layout != LayoutHuggingFace {
		t.Errorf("opened as %+v", d)
	}
	ref, what, err := d.LoadTokenizer()
	if err != nil || what != filepath.Join(src, TokenizerFile) {
		t.Fatalf("%q, %v", what, err)
	}
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, ModulesFile, STConfigFile, SentenceBertFile, "1_Pooling", ModelFile,
		tokenize.VocabFile, TokenizerConfigFile, SpecialTokensFile} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	d2, err := OpenBiEncoder(dir)
	if err != nil || d2.Tokenizer != "" {
		t.Fatalf("without tokenizer.json: %+v, %v", d2, err)
	}
	tok, what, err := d2.LoadTokenizer()
	if err != nil || !strings.Contains(what, tokenize.VocabFile) {
		t.Fatalf("%q, %v", what, err)
	}
	for _, s := range append(slices.Clone(tinyTexts), "Héllo WORLD, naïve café 北京!", "unaffable [MASK] x[SEP]") {
		if a, b := ref.Encode(s), tok.Encode(s); !slices.Equal(a, b) {
			t.Errorf("%q: %v vs %v", s, a, b)
		}
	}
}
