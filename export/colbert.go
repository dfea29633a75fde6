package export

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// A ColBERT run (kind colbert) exports as a PyLate model directory, which
// pylate.models.ColBERT(model_name_or_path=DIR) loads: the BERT body at the root (config.json,
// model.safetensors with BertModel's names, the tokenizer files), the projection as a
// sentence-transformers Dense module in 1_Dense/ (config.json: in_features H, out_features Dim,
// bias false, Identity activation; model.safetensors: linear.weight [Dim,H]), modules.json
// (Transformer, Dense) and config_sentence_transformers.json with PyLate's keys: query_prefix
// "[unused0]" and document_prefix "[unused1]" (package colbert's markers), query_length,
// document_length, attend_to_expansion_tokens, skiplist_words (string.punctuation),
// do_query_expansion true and similarity_fn_name "MaxSim". ragtrain.json records the kind.

// ColBERTDenseDir is the projection's module directory in a PyLate export.
const ColBERTDenseDir = "1_Dense"

func init() { register(colbert.Kind, exportColBERT) }

// ColBERT rebuilds the run's ColBERT model from its checkpoint (names and shapes exactly).
func (r *Run) ColBERT() (*colbert.Model, error) {
	var c colbert.Config
	cfgPath := filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile)
	if r.Kind != colbert.Kind { // before the strict decoding, which would name another kind's field
		return nil, fmt.Errorf("%s: kind %q, want %q", cfgPath, r.Kind, colbert.Kind)
	}
	if err := r.Checkpoint.DecodeConfig(&c); err != nil {
		return nil, err
	}
	if c.Kind != colbert.Kind {
		return nil, fmt.Errorf("%s: kind %q, want %q", cfgPath, c.Kind, colbert.Kind)
	}
	m, err := colbert.New(c, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := loadExactly(r.Checkpoint, m.Params()); err != nil {
		return nil, err
	}
	return m, nil
}

type stDense struct {
	InFeatures  int    `json:"in_features"`
	OutFeatures int    `json:"out_features"`
	Bias        bool   `json:"bias"`
	Activation  string `json:"activation_function"`
}

type pylateConfig struct {
	Version           map[string]string `json:"__version__"`
	Prompts           map[string]string `json:"prompts"`
	DefaultPromptName *string           `json:"default_prompt_name"`
	SimilarityFnName  string            `json:"similarity_fn_name"`
	QueryPrefix       string            `json:"query_prefix"`
	DocumentPrefix    string            `json:"document_prefix"`
	QueryLength       int               `json:"query_length"`
	DocumentLength    int               `json:"document_length"`
	AttendExpansion   bool              `json:"attend_to_expansion_tokens"`
	SkiplistWords     []string          `json:"skiplist_words"`
	DoQueryExpansion  bool              `json:"do_query_expansion"`
}

func exportColBERT(r *Run, dir string, o Options) error {
	m, err := r.ColBERT()
	if err != nil {
		return err
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	src := r.source()
	if err := WriteColBERTDir(dir, m, tok, r.carriedTensors(m.Cfg.Encoder, o.Log)); err != nil {
		return err
	}
	man := &Manifest{FormatVersion: ManifestFormat, Kind: colbert.Kind, Encoder: m.Cfg.Encoder.Encoder, SharedTowers: true,
		Towers: map[string]string{"query": ".", "passage": "."}, Similarity: "maxsim", MaxLength: m.Cfg.DocumentLength, Source: &src}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), man); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "export: ColBERT (H %d -> %d, PyLate layout) from %s\n", m.Cfg.Encoder.Hidden, m.Cfg.Dim, src.Checkpoint)
	return nil
}

// WriteColBERTDir writes m as a PyLate model directory into the existing directory dir (see
// above); carried are tensors of the imported checkpoint written beside the body's (BertModel's
// pooler).
func WriteColBERTDir(dir string, m *colbert.Model, tok *tokenize.Tokenizer, carried []checkpoints.RawTensor) error {
	if tok.VocabSize() != m.Cfg.Encoder.Vocab {
		return fmt.Errorf("export: the tokenizer has %d tokens, the model's vocabulary is %d", tok.VocabSize(), m.Cfg.Encoder.Vocab)
	}
	if _, err := colbert.MarkersOf(tok); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// the body: a BERT directory (BertModel's names, the pooler carried); sentence-transformers'
	// max_seq_length is the passages' cut without the marker (PyLate sets it per call)
	cfg, err := newBertConfig(m.Cfg.Encoder, tok.PadID())
	if err != nil {
		return err
	}
	ts, err := towerTensors(m.Enc.Query, model.HFBertName)
	if err != nil {
		return err
	}
	if err := writeBertModel(dir, ts, carried, cfg); err != nil {
		return err
	}
	if err := writeTokenizerFiles(dir, tok, m.Cfg.DocumentLength-1); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, SentenceBertFile), sentenceBertConfig{MaxSeqLength: m.Cfg.DocumentLength - 1}); err != nil {
		return err
	}
	mods := []stModule{
		{Idx: 0, Name: "0", Path: "", Type: "sentence_transformers.models.Transformer"},
		{Idx: 1, Name: "1", Path: ColBERTDenseDir, Type: "sentence_transformers.models.Dense"},
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ModulesFile), mods); err != nil {
		return err
	}
	dd := filepath.Join(dir, ColBERTDenseDir)
	if err := os.Mkdir(dd, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(dd, ConfigFile), stDense{InFeatures: m.Cfg.Encoder.Hidden, OutFeatures: m.Cfg.Dim,
		Activation: "torch.nn.modules.linear.Identity"}); err != nil {
		return err
	}
	w := checkpoints.Tensor{Name: "linear.weight", Shape: []int{m.Cfg.Dim, m.Cfg.Encoder.Hidden}, Data: m.Proj.Value.Data().([]float32)}
	if err := writeSafetensorsPT(filepath.Join(dd, ModelFile), []checkpoints.Tensor{w}); err != nil {
		return err
	}
	skip := strings.Split(colbert.Punctuation, "")
	return atomicfile.WriteJSON(filepath.Join(dir, STConfigFile), pylateConfig{
		Version: map[string]string{"sentence_transformers": stVersionWithSimilar}, Prompts: map[string]string{},
		SimilarityFnName: "MaxSim", QueryPrefix: colbert.QueryPrefix, DocumentPrefix: colbert.DocumentPrefix,
		QueryLength: m.Cfg.QueryLength, DocumentLength: m.Cfg.DocumentLength, AttendExpansion: m.Cfg.AttendExpansion,
		SkiplistWords: skip, DoQueryExpansion: true,
	})
}

// WriteColBERT exports m into the new directory out as WriteColBERTDir lays it out (with
// ragtrain.json; carried as there, e.g. CarriedTensors of the BERT directory m was built from);
// out appears complete or not at all.
func WriteColBERT(out string, m *colbert.Model, tok *tokenize.Tokenizer, carried []checkpoints.RawTensor) error {
	return writeDir(out, func(tmp string) error {
		if err := WriteColBERTDir(tmp, m, tok, carried); err != nil {
			return err
		}
		return atomicfile.WriteJSON(filepath.Join(tmp, ManifestFile), &Manifest{FormatVersion: ManifestFormat, Kind: colbert.Kind, Encoder: m.Cfg.Encoder.Encoder,
			SharedTowers: true, Towers: map[string]string{"query": ".", "passage": "."}, Similarity: "maxsim", MaxLength: m.Cfg.DocumentLength})
	})
}
