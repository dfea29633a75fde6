package export

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// The Hugging Face side of a transformer tower: BertModel's config.json and state-dict names,
// the tokenizer files and the sentence-transformers module files. Cross-encoder and reader
// exports reuse bertConfig, writeTokenizerFiles and writeSafetensorsPT.

// File names of a Hugging Face / sentence-transformers model directory.
const (
	ModelFile            = checkpoints.ModelFile // model.safetensors
	ConfigFile           = "config.json"
	TokenizerFile        = checkpoints.TokenizerFile // tokenizer.json
	TokenizerConfigFile  = "tokenizer_config.json"
	SpecialTokensFile    = "special_tokens_map.json"
	ModulesFile          = "modules.json"
	PoolingConfigFile    = "1_Pooling/config.json"
	NormalizeDir         = "2_Normalize" // the Normalize module of a cosine export: an empty directory
	STConfigFile         = "config_sentence_transformers.json"
	SentenceBertFile     = "sentence_bert_config.json"
	modelTypeBert        = "bert"
	modelTypeBow         = "ragtrain-bow"
	stVersionWithSimilar = "3.0.0" // the first sentence-transformers release reading similarity_fn_name
)

// bertConfig is BertModel's config.json (transformers.BertConfig). Pointer fields are optional
// when reading a foreign checkpoint; BertConfig's defaults apply when they are absent.
type bertConfig struct {
	Architectures             []string `json:"architectures,omitempty"`
	ModelType                 string   `json:"model_type"`
	VocabSize                 int      `json:"vocab_size"`
	HiddenSize                int      `json:"hidden_size"`
	NumHiddenLayers           int      `json:"num_hidden_layers"`
	NumAttentionHeads         int      `json:"num_attention_heads"`
	IntermediateSize          int      `json:"intermediate_size"`
	HiddenAct                 *string  `json:"hidden_act,omitempty"`
	HiddenDropoutProb         float64  `json:"hidden_dropout_prob"`
	AttentionProbsDropoutProb float64  `json:"attention_probs_dropout_prob"`
	MaxPositionEmbeddings     int      `json:"max_position_embeddings"`
	TypeVocabSize             *int     `json:"type_vocab_size,omitempty"`
	InitializerRange          float64  `json:"initializer_range"`
	LayerNormEps              *float64 `json:"layer_norm_eps,omitempty"`
	PadTokenID                int      `json:"pad_token_id"`
	PositionEmbeddingType     *string  `json:"position_embedding_type,omitempty"`
	IsDecoder                 bool     `json:"is_decoder,omitempty"`
	AddCrossAttention         bool     `json:"add_cross_attention,omitempty"`
	UseCache                  bool     `json:"use_cache"`
	TorchDtype                string   `json:"torch_dtype,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// newBertConfig describes a transformer tower as BertModel.
func newBertConfig(c model.EncoderConfig, padID int) (bertConfig, error) {
	if c.Encoder != model.EncoderTransformer {
		return bertConfig{}, fmt.Errorf("export: a %s encoder has no BERT config", c.Encoder)
	}
	if c.Causal {
		return bertConfig{}, fmt.Errorf("export: a causal transformer encoder is not a BERT encoder")
	}
	return bertConfig{
		Architectures: []string{"BertModel"}, ModelType: modelTypeBert,
		VocabSize: c.Vocab, HiddenSize: c.Hidden, NumHiddenLayers: c.Layers, NumAttentionHeads: c.Heads,
		IntermediateSize: c.FFN, HiddenAct: ptr("gelu"),
		HiddenDropoutProb: c.Dropout, AttentionProbsDropoutProb: c.Dropout,
		MaxPositionEmbeddings: c.MaxPosition, TypeVocabSize: ptr(model.TypeVocab),
		InitializerRange: 0.02, LayerNormEps: ptr(model.LayerNormEps), PadTokenID: padID,
		PositionEmbeddingType: ptr("absolute"), UseCache: true, TorchDtype: "float32",
	}, nil
}

// encoderConfig checks that c describes an encoder this module computes exactly and converts
// it: model_type "bert" (BertModel's architecture), hidden_act "gelu" (the exact erf GELU of
// model.GELU; transformers' "gelu_new", "gelu_pytorch_tanh", "relu", ... differ), absolute
// position embeddings, type_vocab_size model.TypeVocab (2), layer_norm_eps model.LayerNormEps
// (1e-12, the epsilon of every LayerNorm of model.Tower), and an encoder (is_decoder and
// add_cross_attention false). An absent field takes BertConfig's default, which is each of
// these. The error names the file, the field, its value and what this toolkit computes.
func (c bertConfig) encoderConfig(path string) (model.EncoderConfig, error) {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%s: %s = %v, but this toolkit's transformer computes %s", path, field, v, want)
	}
	switch {
	case c.ModelType != modelTypeBert:
		return model.EncoderConfig{}, bad("model_type", fmt.Sprintf("%q", c.ModelType), `"bert" (BertModel)`)
	case c.HiddenAct != nil && *c.HiddenAct != "gelu":
		return model.EncoderConfig{}, bad("hidden_act", fmt.Sprintf("%q", *c.HiddenAct), `"gelu" (the exact erf GELU)`)
	case c.TypeVocabSize != nil && *c.TypeVocabSize != model.TypeVocab:
		return model.EncoderConfig{}, bad("type_vocab_size", *c.TypeVocabSize, fmt.Sprintf("%d token types", model.TypeVocab))
	case c.LayerNormEps != nil && *c.LayerNormEps != model.LayerNormEps:
		return model.EncoderConfig{}, bad("layer_norm_eps", *c.LayerNormEps, fmt.Sprintf("LayerNorm with eps %g", model.LayerNormEps))
	case c.PositionEmbeddingType != nil && *c.PositionEmbeddingType != "absolute":
		return model.EncoderConfig{}, bad("position_embedding_type", fmt.Sprintf("%q", *c.PositionEmbeddingType), `"absolute" position embeddings`)
	case c.IsDecoder:
		return model.EncoderConfig{}, bad("is_decoder", true, "an encoder (is_decoder false)")
	case c.AddCrossAttention:
		return model.EncoderConfig{}, bad("add_cross_attention", true, "self-attention only (add_cross_attention false)")
	}
	cfg := model.EncoderConfig{
		Encoder: model.EncoderTransformer, Vocab: c.VocabSize, Hidden: c.HiddenSize, Layers: c.NumHiddenLayers,
		Heads: c.NumAttentionHeads, FFN: c.IntermediateSize, MaxPosition: c.MaxPositionEmbeddings,
		Dropout: c.HiddenDropoutProb,
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// writeSafetensorsPT writes tensors as transformers' save_pretrained does: F32, with the
// metadata {"format": "pt"} that from_pretrained checks.
func writeSafetensorsPT(path string, ts []checkpoints.Tensor) error {
	return checkpoints.WriteSafetensors(path, ts, ptMetadata)
}

// writeHFModel writes the two files of a Hugging Face model directory that hold the model:
// model.safetensors (ts, as writeSafetensorsPT) and config.json (cfg).
func writeHFModel(dir string, ts []checkpoints.Tensor, cfg any) error {
	if err := writeSafetensorsPT(filepath.Join(dir, ModelFile), ts); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, ConfigFile), cfg)
}

// writeBertModel is writeHFModel for a BERT body whose model.safetensors also holds carried,
// tensors of the imported checkpoint written unchanged after ts (BertModel's pooler); a
// carried name that is also in ts is an error.
func writeBertModel(dir string, ts []checkpoints.Tensor, carried []checkpoints.RawTensor, cfg bertConfig) error {
	raw := make([]checkpoints.RawTensor, 0, len(ts)+len(carried))
	for _, t := range ts {
		raw = append(raw, checkpoints.F32Raw(t))
	}
	for _, c := range carried {
		if slices.ContainsFunc(ts, func(t checkpoints.Tensor) bool { return t.Name == c.Name }) {
			return fmt.Errorf("export: carried tensor %q is also a trained parameter", c.Name)
		}
		raw = append(raw, c)
	}
	if err := checkpoints.WriteSafetensorsRaw(filepath.Join(dir, ModelFile), raw, ptMetadata); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, ConfigFile), cfg)
}

// ptMetadata is the safetensors metadata transformers' save_pretrained writes.
var ptMetadata = map[string]string{"format": "pt"}

// towerTensors returns the tower's parameters under the names name(param) gives.
func towerTensors(t *model.Tower, name func(string) (string, error)) ([]checkpoints.Tensor, error) {
	var ts []checkpoints.Tensor
	for _, p := range t.Params() {
		n, err := name(p.Name)
		if err != nil {
			return nil, err
		}
		ts = append(ts, checkpoints.Tensor{Name: n, Shape: append([]int(nil), p.Value.Shape()...),
			Data: p.Value.Data().([]float32)})
	}
	return ts, nil
}

// tokenizerConfig is tokenizer_config.json for BertTokenizer(Fast).
type tokenizerConfig struct {
	TokenizerClass            string `json:"tokenizer_class"`
	DoLowerCase               bool   `json:"do_lower_case"`
	StripAccents              bool   `json:"strip_accents"`
	TokenizeChineseChars      bool   `json:"tokenize_chinese_chars"`
	ModelMaxLength            int    `json:"model_max_length"`
	CleanUpTokenizationSpaces bool   `json:"clean_up_tokenization_spaces"`
	specialTokens
}

// specialTokens is special_tokens_map.json.
type specialTokens struct {
	CLSToken  string `json:"cls_token"`
	MaskToken string `json:"mask_token"`
	PadToken  string `json:"pad_token"`
	SepToken  string `json:"sep_token"`
	UnkToken  string `json:"unk_token"`
}

// writeTokenizerFiles writes tokenizer.json (tokenize.Save), tokenizer_config.json and
// special_tokens_map.json into dir. maxLength (tokens, [CLS] and [SEP] included) becomes
// model_max_length, so that truncation=True in transformers cuts where training did.
func writeTokenizerFiles(dir string, tok *tokenize.Tokenizer, maxLength int) error {
	path := filepath.Join(dir, TokenizerFile)
	if err := tok.Save(path); err != nil {
		return err
	}
	var saved struct {
		Normalizer struct {
			Lowercase    bool `json:"lowercase"`
			StripAccents bool `json:"strip_accents"`
			ChineseChars bool `json:"handle_chinese_chars"`
		} `json:"normalizer"`
	}
	if err := readJSON(path, &saved, false); err != nil {
		return err
	}
	name := func(id int) string { s, _ := tok.Token(id); return s }
	sp := specialTokens{CLSToken: name(tok.CLSID()), MaskToken: name(tok.MaskID()), PadToken: name(tok.PadID()),
		SepToken: name(tok.SEPID()), UnkToken: name(tok.UnkID())}
	if err := atomicfile.WriteJSON(filepath.Join(dir, TokenizerConfigFile), tokenizerConfig{
		TokenizerClass: "BertTokenizer", DoLowerCase: saved.Normalizer.Lowercase, StripAccents: saved.Normalizer.StripAccents,
		TokenizeChineseChars: saved.Normalizer.ChineseChars, ModelMaxLength: maxLength, CleanUpTokenizationSpaces: true,
		specialTokens: sp,
	}); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, SpecialTokensFile), sp)
}

// The sentence-transformers files.

type stModule struct {
	Idx  int    `json:"idx"`
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

type stPooling struct {
	WordEmbeddingDimension int  `json:"word_embedding_dimension"`
	CLSToken               bool `json:"pooling_mode_cls_token"`
	MeanTokens             bool `json:"pooling_mode_mean_tokens"`
	MaxTokens              bool `json:"pooling_mode_max_tokens"`
	MeanSqrtLenTokens      bool `json:"pooling_mode_mean_sqrt_len_tokens"`
	WeightedMeanTokens     bool `json:"pooling_mode_weightedmean_tokens"`
	LastToken              bool `json:"pooling_mode_lasttoken"`
	IncludePrompt          bool `json:"include_prompt"`
}

type stConfig struct {
	Version           map[string]string `json:"__version__"`
	Prompts           map[string]string `json:"prompts"`
	DefaultPromptName *string           `json:"default_prompt_name"`
	SimilarityFnName  string            `json:"similarity_fn_name"`
	// TruncateDim is the embedding size the model serves (Matryoshka): sentence-transformers
	// (from the release with sentence_transformer/ and base/, v5.x/6) reads it at load when the
	// caller passes no truncate_dim and keeps the first TruncateDim coordinates of every
	// embedding, after Normalize; earlier releases ignore the key. Absent for the full vectors.
	TruncateDim int `json:"truncate_dim,omitempty"`
}

type sentenceBertConfig struct {
	MaxSeqLength int  `json:"max_seq_length"`
	DoLowerCase  bool `json:"do_lower_case"`
}

// writeSentenceTransformers writes modules.json (Transformer, then Pooling, then for cosine
// similarity Normalize), 1_Pooling/config.json, an empty 2_Normalize/ for cosine (as
// sentence-transformers saves a Normalize module), sentence_bert_config.json and
// config_sentence_transformers.json, so that SentenceTransformer(dir) encodes as the tower does
// and, for cosine, returns unit vectors as a cosine model of sentence-transformers does.
func writeSentenceTransformers(dir string, c model.EncoderConfig, maxLength int, similarity string) error {
	return writeSentenceTransformersDim(dir, c, maxLength, similarity, 0)
}

// writeSentenceTransformersDim is writeSentenceTransformers with truncate_dim (> 0) in
// config_sentence_transformers.json.
func writeSentenceTransformersDim(dir string, c model.EncoderConfig, maxLength int, similarity string, truncateDim int) error {
	mods := []stModule{
		{Idx: 0, Name: "0", Path: "", Type: "sentence_transformers.models.Transformer"},
		{Idx: 1, Name: "1", Path: "1_Pooling", Type: "sentence_transformers.models.Pooling"},
	}
	if similarity == "cosine" {
		mods = append(mods, stModule{Idx: 2, Name: "2", Path: NormalizeDir, Type: "sentence_transformers.models.Normalize"})
		if err := os.MkdirAll(filepath.Join(dir, NormalizeDir), 0o755); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ModulesFile), mods); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755); err != nil {
		return err
	}
	pooling := c.Pooling
	if pooling == "" {
		pooling = model.PoolingMean
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, PoolingConfigFile), stPooling{
		WordEmbeddingDimension: c.Hidden, CLSToken: pooling == model.PoolingCLS, MeanTokens: pooling == model.PoolingMean,
		IncludePrompt: true,
	}); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, SentenceBertFile), sentenceBertConfig{MaxSeqLength: maxLength}); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, STConfigFile), stConfig{
		Version: map[string]string{"sentence_transformers": stVersionWithSimilar}, Prompts: map[string]string{},
		SimilarityFnName: similarity, TruncateDim: truncateDim,
	})
}

// readPooling reads 1_Pooling/config.json: "mean", "cls", or "" when the file is absent.
func readPooling(dir string) (string, error) {
	path := filepath.Join(dir, PoolingConfigFile)
	if _, err := os.Stat(path); err != nil {
		return "", nil
	}
	return readPoolingFile(path, 0)
}

// stPoolingModes maps the Pooling module's legacy boolean fields to its mode names
// (sentence-transformers 3+ writes pooling_mode: one name, or a list of names to concatenate).
var stPoolingModes = []struct{ field, mode string }{
	{"pooling_mode_cls_token", "cls"}, {"pooling_mode_max_tokens", "max"}, {"pooling_mode_mean_tokens", "mean"},
	{"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"}, {"pooling_mode_weightedmean_tokens", "weightedmean"},
	{"pooling_mode_lasttoken", "lasttoken"},
}

// readPoolingFile reads a Pooling module's config.json: pooling_mode ("mean" or "cls", or a
// one-element list of it), or else the legacy booleans pooling_mode_mean_tokens /
// pooling_mode_cls_token, exactly one of them true. Another mode (max, mean_sqrt_len_tokens,
// weightedmean, lasttoken), several modes (concatenated by sentence-transformers) and no mode
// are errors naming the file, the field and the mode. With hidden > 0, embedding_dimension
// (word_embedding_dimension in older files) must equal it.
func readPoolingFile(path string, hidden int) (string, error) {
	var raw map[string]json.RawMessage
	if err := readJSON(path, &raw, false); err != nil {
		return "", err
	}
	var p struct {
		Mode      json.RawMessage `json:"pooling_mode"`
		Dim       *int            `json:"embedding_dimension"`
		LegacyDim *int            `json:"word_embedding_dimension"`
	}
	if err := readJSON(path, &p, false); err != nil {
		return "", err
	}
	var modes, fields []string
	if len(p.Mode) > 0 && string(p.Mode) != "null" {
		var one string
		var list []string
		switch {
		case json.Unmarshal(p.Mode, &one) == nil:
			modes, fields = []string{one}, []string{fmt.Sprintf("pooling_mode = %q", one)}
		case json.Unmarshal(p.Mode, &list) == nil:
			modes = list
			for _, m := range list {
				fields = append(fields, fmt.Sprintf("pooling_mode [%q]", m))
			}
		default:
			return "", fmt.Errorf("%s: pooling_mode = %s, want a mode name or a list of them", path, p.Mode)
		}
	} else {
		for _, m := range stPoolingModes {
			var on bool
			if v, ok := raw[m.field]; ok && json.Unmarshal(v, &on) == nil && on {
				modes, fields = append(modes, m.mode), append(fields, m.field+" = true")
			}
		}
	}
	const want = `this toolkit pools by "mean" (pooling_mode_mean_tokens) or "cls" (pooling_mode_cls_token)`
	switch len(modes) {
	case 0:
		return "", fmt.Errorf("%s: no pooling mode (pooling_mode or a pooling_mode_* field set true); %s", path, want)
	case 1:
	default:
		return "", fmt.Errorf("%s: %d pooling modes concatenated (%s); %s, one mode", path, len(modes), strings.Join(fields, ", "), want)
	}
	var mode string
	switch modes[0] {
	case "mean":
		mode = model.PoolingMean
	case "cls":
		mode = model.PoolingCLS
	default:
		return "", fmt.Errorf("%s: pooling mode %q (%s); %s", path, modes[0], fields[0], want)
	}
	for _, d := range []struct {
		v     *int
		field string
	}{{p.Dim, "embedding_dimension"}, {p.LegacyDim, "word_embedding_dimension"}} {
		if d.v != nil && hidden > 0 && *d.v != hidden {
			return "", fmt.Errorf("%s: %s = %d, but the transformer's hidden_size is %d", path, d.field, *d.v, hidden)
		}
	}
	return mode, nil
}

// stPipeline is what a sentence-transformers modules.json says: where the Transformer module's
// files are, the Pooling module's config.json, and whether a Normalize module ends the pipeline.
type stPipeline struct {
	transformer string // the directory of config.json, the weights, the tokenizer and sentence_bert_config.json
	pooling     string // the Pooling module's config.json
	normalize   bool
}

// stModuleKind returns the class name of a sentence-transformers module type
// ("sentence_transformers.models.Pooling" and, since sentence-transformers 6,
// "sentence_transformers.sentence_transformer.modules.pooling.Pooling" are both "Pooling"), ""
// for a type outside the sentence_transformers package.
func stModuleKind(typ string) string {
	if !strings.HasPrefix(typ, "sentence_transformers.") {
		return ""
	}
	return typ[strings.LastIndex(typ, ".")+1:]
}

// readModules reads dir/modules.json (nil, nil when it is absent). The modules must be, in
// order, a Transformer (path "" for dir itself, or a subdirectory), a Pooling (at any
// subdirectory) and optionally a Normalize: what this toolkit computes. Any other module (Dense,
// LayerNorm, a second Pooling, a custom class, ...) is an error naming modules.json, the module
// and its type; so is a path outside dir or a Pooling directory without config.json.
func readModules(dir string) (*stPipeline, error) {
	path := filepath.Join(dir, ModulesFile)
	if !exists(path) {
		return nil, nil
	}
	var mods []stModule
	if err := readJSON(path, &mods, false); err != nil {
		return nil, err
	}
	const computes = "this toolkit computes Transformer + Pooling (+ Normalize)"
	want := []string{"Transformer", "Pooling", "Normalize"}
	p := &stPipeline{}
	for i, m := range mods {
		kind := stModuleKind(m.Type)
		if i >= len(want) || kind != want[i] {
			what := "Transformer, Pooling, then optionally Normalize"
			if i < len(want) {
				what = "a " + want[i] + " module"
			}
			return nil, fmt.Errorf("%s: module %d (name %q, path %q) is %q; %s, so module %d must be %s", path, i, m.Name, m.Path, m.Type, computes, i, what)
		}
		local := m.Path == "" || filepath.IsLocal(m.Path)
		switch kind {
		case "Transformer":
			if !local {
				return nil, fmt.Errorf("%s: the Transformer module's path %q is not a directory inside %s", path, m.Path, dir)
			}
			p.transformer = filepath.Join(dir, m.Path)
		case "Pooling":
			if m.Path == "" || !local {
				return nil, fmt.Errorf("%s: the Pooling module's path %q is not a subdirectory of %s", path, m.Path, dir)
			}
			p.pooling = filepath.Join(dir, m.Path, ConfigFile)
			if !exists(p.pooling) {
				return nil, fmt.Errorf("%s: the Pooling module (path %q) has no %s", path, m.Path, p.pooling)
			}
		case "Normalize":
			p.normalize = true // its directory may be absent or empty: it has no parameters
		}
	}
	if len(mods) < 2 {
		return nil, fmt.Errorf("%s: %d modules; %s, and a sentence embedding needs the Pooling module", path, len(mods), computes)
	}
	return p, nil
}

// readSimilarity reads similarity_fn_name from config_sentence_transformers.json: "cosine" or
// "dot"; "cosine", sentence-transformers' default, when the file has no similarity_fn_name (or
// null; files written before sentence-transformers 3); "" when there is no such file. Another
// function (sentence-transformers also knows "euclidean" and
// "manhattan") is an error naming the file, field and value.
func readSimilarity(dir string) (string, error) {
	path := filepath.Join(dir, STConfigFile)
	if _, err := os.Stat(path); err != nil {
		return "", nil
	}
	var c stConfig
	if err := readJSON(path, &c, false); err != nil {
		return "", err
	}
	if err := checkSimilarity(path, "similarity_fn_name", c.SimilarityFnName); err != nil {
		return "", err
	}
	if c.SimilarityFnName == "" {
		return stDefaultSimilarity, nil
	}
	return c.SimilarityFnName, nil
}

// stDefaultSimilarity is sentence-transformers' similarity when its files do not name one
// (SimilarityFunction.COSINE).
const stDefaultSimilarity = "cosine"
