package export

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
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

// encoderConfig checks that c describes an encoder this module computes exactly (absolute
// positions, exact GELU, two token types, layer_norm_eps 1e-12, not a decoder) and converts it.
func (c bertConfig) encoderConfig(path string) (model.EncoderConfig, error) {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%s: %s = %v, but this toolkit's transformer needs %s", path, field, v, want)
	}
	switch {
	case c.HiddenAct != nil && *c.HiddenAct != "gelu":
		return model.EncoderConfig{}, bad("hidden_act", fmt.Sprintf("%q", *c.HiddenAct), `"gelu" (exact erf GELU)`)
	case c.TypeVocabSize != nil && *c.TypeVocabSize != model.TypeVocab:
		return model.EncoderConfig{}, bad("type_vocab_size", *c.TypeVocabSize, fmt.Sprint(model.TypeVocab))
	case c.LayerNormEps != nil && *c.LayerNormEps != model.LayerNormEps:
		return model.EncoderConfig{}, bad("layer_norm_eps", *c.LayerNormEps, fmt.Sprint(model.LayerNormEps))
	case c.PositionEmbeddingType != nil && *c.PositionEmbeddingType != "absolute":
		return model.EncoderConfig{}, bad("position_embedding_type", fmt.Sprintf("%q", *c.PositionEmbeddingType), `"absolute"`)
	case c.IsDecoder:
		return model.EncoderConfig{}, bad("is_decoder", true, "an encoder (false)")
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
	return checkpoints.WriteSafetensors(path, ts, map[string]string{"format": "pt"})
}

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
	if err := writeJSON(filepath.Join(dir, TokenizerConfigFile), tokenizerConfig{
		TokenizerClass: "BertTokenizer", DoLowerCase: saved.Normalizer.Lowercase, StripAccents: saved.Normalizer.StripAccents,
		TokenizeChineseChars: saved.Normalizer.ChineseChars, ModelMaxLength: maxLength, CleanUpTokenizationSpaces: true,
		specialTokens: sp,
	}); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, SpecialTokensFile), sp)
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
}

type sentenceBertConfig struct {
	MaxSeqLength int  `json:"max_seq_length"`
	DoLowerCase  bool `json:"do_lower_case"`
}

// writeSentenceTransformers writes modules.json (Transformer, then Pooling),
// 1_Pooling/config.json, sentence_bert_config.json and config_sentence_transformers.json, so
// that SentenceTransformer(dir) encodes as the tower does.
func writeSentenceTransformers(dir string, c model.EncoderConfig, maxLength int, similarity string) error {
	if err := writeJSON(filepath.Join(dir, ModulesFile), []stModule{
		{Idx: 0, Name: "0", Path: "", Type: "sentence_transformers.models.Transformer"},
		{Idx: 1, Name: "1", Path: "1_Pooling", Type: "sentence_transformers.models.Pooling"},
	}); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755); err != nil {
		return err
	}
	pooling := c.Pooling
	if pooling == "" {
		pooling = model.PoolingMean
	}
	if err := writeJSON(filepath.Join(dir, PoolingConfigFile), stPooling{
		WordEmbeddingDimension: c.Hidden, CLSToken: pooling == model.PoolingCLS, MeanTokens: pooling == model.PoolingMean,
		IncludePrompt: true,
	}); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, SentenceBertFile), sentenceBertConfig{MaxSeqLength: maxLength}); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, STConfigFile), stConfig{
		Version: map[string]string{"sentence_transformers": stVersionWithSimilar}, Prompts: map[string]string{},
		SimilarityFnName: similarity,
	})
}

// readPooling reads 1_Pooling/config.json: "mean", "cls", or "" when the file is absent.
func readPooling(dir string) (string, error) {
	path := filepath.Join(dir, PoolingConfigFile)
	if _, err := os.Stat(path); err != nil {
		return "", nil
	}
	var p stPooling
	if err := readJSON(path, &p, false); err != nil {
		return "", err
	}
	var modes []string
	for _, m := range []struct {
		on   bool
		name string
	}{{p.MeanTokens, "mean_tokens"}, {p.CLSToken, "cls_token"}, {p.MaxTokens, "max_tokens"},
		{p.MeanSqrtLenTokens, "mean_sqrt_len_tokens"}, {p.WeightedMeanTokens, "weightedmean_tokens"}, {p.LastToken, "lasttoken"}} {
		if m.on {
			modes = append(modes, m.name)
		}
	}
	switch strings.Join(modes, ",") {
	case "mean_tokens":
		return model.PoolingMean, nil
	case "cls_token":
		return model.PoolingCLS, nil
	}
	return "", fmt.Errorf("%s: pooling modes [%s]; this toolkit pools by exactly one of mean_tokens or cls_token", path, strings.Join(modes, ", "))
}

// readSimilarity reads similarity_fn_name from config_sentence_transformers.json ("" if none):
// "cosine" or "dot"; another function (sentence-transformers also knows "euclidean" and
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
	return c.SimilarityFnName, nil
}
