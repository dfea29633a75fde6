package export

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// KindSplade is config.json's kind of a SPLADE checkpoint (recipe kind "splade").
const KindSplade = "splade"

// SpladeConfig is the config.json of a SPLADE checkpoint: the BERT encoder (one tower for
// queries and passages; model.Splade adds the MLM head), the lengths and the pruning, what an
// export and a search need to rebuild the model and encode as training did.
type SpladeConfig struct {
	Kind            string              `json:"kind"` // KindSplade
	Encoder         model.EncoderConfig `json:"encoder"`
	MaxLength       int                 `json:"max_length"`       // passages, in tokens with [CLS] and [SEP]
	QueryMaxLength  int                 `json:"query_max_length"` // queries
	TopKQuery       int                 `json:"top_k_query"`      // pruning at search (0: none)
	TopKPassage     int                 `json:"top_k_passage"`    // pruning at indexing (0: none)
	DecoderBiasInit float64             `json:"decoder_bias_init"`
}

// SpladePoolingDir is the SpladePooling module's directory in a SparseEncoder export.
const SpladePoolingDir = "1_SpladePooling"

func init() { register(KindSplade, exportSplade) }

// Splade rebuilds the run's SPLADE encoder from its checkpoint: the architecture from
// config.json, every parameter (the tower's and the head's) from model.safetensors.
func (r *Run) Splade() (*model.Splade, SpladeConfig, error) {
	var c SpladeConfig
	path := filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile)
	if r.Kind != KindSplade { // before the strict decoding, which would name another kind's field
		return nil, c, fmt.Errorf("%s: kind %q, want %q", path, r.Kind, KindSplade)
	}
	if err := r.Checkpoint.DecodeConfig(&c); err != nil {
		return nil, c, err
	}
	if c.Kind != KindSplade {
		return nil, c, fmt.Errorf("%s: kind %q, want %q", path, c.Kind, KindSplade)
	}
	m, err := model.NewBiEncoder(c.Encoder, true, 0)
	if err != nil {
		return nil, c, fmt.Errorf("%s: %w", path, err)
	}
	s, err := model.NewSplade(m.Query, c.DecoderBiasInit)
	if err != nil {
		return nil, c, fmt.Errorf("%s: %w", path, err)
	}
	return s, c, loadExactly(r.Checkpoint, s.Params())
}

func exportSplade(r *Run, dir string, o Options) error {
	s, c, err := r.Splade()
	if err != nil {
		return err
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	if err := writeSparseEncoder(dir, s, tok, c); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "export: SPLADE sparse encoder (sentence-transformers SparseEncoder, BertForMaskedLM + SpladePooling max) from %s\n", r.source().Checkpoint)
	return nil
}

// The sentence-transformers 6 SparseEncoder files (as SparseEncoder.save writes them for
// [Transformer(transformer_task="fill-mask"), SpladePooling("max", "relu")]).
type stSpladePooling struct {
	PoolingStrategy    string `json:"pooling_strategy"`
	ActivationFunction string `json:"activation_function"`
	EmbeddingDimension int    `json:"embedding_dimension"`
}

type stModality struct {
	Method           string `json:"method"`
	MethodOutputName string `json:"method_output_name"`
}

type stFillMaskConfig struct {
	TransformerTask  string                `json:"transformer_task"`
	ModalityConfig   map[string]stModality `json:"modality_config"`
	ModuleOutputName string                `json:"module_output_name"`
}

type stSparseConfig struct {
	ModelType         string            `json:"model_type"`
	Version           map[string]string `json:"__version__"`
	Prompts           map[string]string `json:"prompts"`
	DefaultPromptName *string           `json:"default_prompt_name"`
	SimilarityFnName  string            `json:"similarity_fn_name"`
}

// WriteSparseEncoder writes s as a sentence-transformers SparseEncoder directory into out
// (atomically): BertForMaskedLM's config.json and model.safetensors ("bert." + BertModel's names,
// cls.predictions.* for the head, the decoder tied to the word embeddings), the tokenizer files
// (model_max_length c.MaxLength: sentence-transformers cuts queries and passages there),
// modules.json, sentence_bert_config.json (transformer_task "fill-mask"),
// 1_SpladePooling/config.json (max, relu, V) and config_sentence_transformers.json
// (SparseEncoder, dot similarity). SparseEncoder(out).encode gives the vectors of
// model.SpladeRunner before pruning (tools/interop/splade.py checks it).
func WriteSparseEncoder(out string, s *model.Splade, tok *tokenize.Tokenizer, c SpladeConfig) error {
	return writeDir(out, func(dir string) error { return writeSparseEncoder(dir, s, tok, c) })
}

func writeSparseEncoder(dir string, s *model.Splade, tok *tokenize.Tokenizer, c SpladeConfig) error {
	cfg, err := newBertConfig(s.Tower.Cfg, tok.PadID())
	if err != nil {
		return err
	}
	cfg.Architectures = []string{"BertForMaskedLM"}
	ts, err := towerTensors(s.Tower, func(n string) (string, error) {
		hf, err := model.HFBertName(n)
		return "bert." + hf, err
	})
	if err != nil {
		return err
	}
	for _, p := range s.HeadParams() {
		ts = append(ts, checkpoints.Tensor{Name: model.SpladeParamNames[p.Name], Shape: append([]int(nil), p.Value.Shape()...), Data: p.Value.Data().([]float32)})
	}
	if err := writeHFModel(dir, ts, cfg); err != nil {
		return err
	}
	if err := writeTokenizerFiles(dir, tok, c.MaxLength); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ModulesFile), []stModule{
		{Idx: 0, Name: "0", Path: "", Type: "sentence_transformers.base.modules.transformer.Transformer"},
		{Idx: 1, Name: "1", Path: SpladePoolingDir, Type: "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"},
	}); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, SentenceBertFile), stFillMaskConfig{TransformerTask: "fill-mask",
		ModalityConfig:   map[string]stModality{"text": {Method: "forward", MethodOutputName: "logits"}},
		ModuleOutputName: "token_embeddings"}); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, SpladePoolingDir), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, SpladePoolingDir, ConfigFile), stSpladePooling{PoolingStrategy: "max", ActivationFunction: "relu", EmbeddingDimension: s.Dim()}); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, STConfigFile), stSparseConfig{ModelType: "SparseEncoder",
		Version: map[string]string{"sentence_transformers": "6.2.0"}, Prompts: map[string]string{"query": "", "document": ""}, SimilarityFnName: "dot"})
}
