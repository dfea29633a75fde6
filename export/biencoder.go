package export

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

func init() { register(KindBiEncoder, exportBiEncoder) }

// KindBiEncoder is the config.json "kind" of retriever checkpoints.
const KindBiEncoder = model.KindBiEncoder

// ManifestFormat is the format_version of ragtrain.json this package writes.
const ManifestFormat = 1

// Manifest is ragtrain.json, the root file of every export: which model kind it holds and
// where each part lives.
type Manifest struct {
	FormatVersion int    `json:"format_version"`
	Kind          string `json:"kind"`    // "bi-encoder"
	Encoder       string `json:"encoder"` // "bow" or "transformer"
	SharedTowers  bool   `json:"shared_towers"`
	// Towers maps each role to its directory, relative to the export root: {"query": ".",
	// "passage": "."} for shared towers, {"query": "query", "passage": "passage"} otherwise.
	Towers      map[string]string `json:"towers"`
	Pooling     string            `json:"pooling"`     // "mean" or "cls"
	Similarity  string            `json:"similarity"`  // "cosine" or "dot"
	Temperature float64           `json:"temperature"` // tau of the training loss (for the record)
	MaxLength   int               `json:"max_length"`  // tokens per text, [CLS] and [SEP] included
	// TruncateDim is the number of leading coordinates the model is served with (a Matryoshka
	// model exported with Options.TruncateDim; sentence-transformers' truncate_dim); absent for
	// the full vectors.
	TruncateDim int `json:"truncate_dim,omitempty"`
	// Embeddings is the directory of the corpus embeddings, "" when none were written.
	Embeddings string  `json:"embeddings,omitempty"`
	Source     *Source `json:"source,omitempty"`
}

// BiEncoderMeta is what a bi-encoder export records besides the weights and the tokenizer.
type BiEncoderMeta struct {
	Similarity  string  // "cosine" or "dot"
	Temperature float64 // the training loss's tau
	MaxLength   int     // tokens per text, [CLS] and [SEP] included
	// TruncateDim, when > 0, serves the first TruncateDim coordinates of every embedding
	// (sentence-transformers' truncate_dim, after its Normalize module); 0 = all.
	TruncateDim int
	// Carried are tensors written unchanged beside a transformer tower's parameters in its
	// model.safetensors: those of an imported checkpoint that training does not touch (BertModel's
	// pooler; Run.carriedTensors), so that transformers' BertModel finds them. A name the tower's
	// parameters already use is an error.
	Carried []checkpoints.RawTensor
}

// BiEncoder rebuilds the run's bi-encoder from its checkpoint: the architecture from
// config.json, every parameter from model.safetensors (names and shapes must match exactly).
func (r *Run) BiEncoder() (*model.BiEncoder, BiEncoderMeta, error) {
	var c model.BiEncoderConfig
	if err := r.Checkpoint.DecodeConfig(&c); err != nil {
		return nil, BiEncoderMeta{}, err
	}
	if c.Kind != KindBiEncoder {
		return nil, BiEncoderMeta{}, fmt.Errorf("%s: kind %q, want %q", filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile), c.Kind, KindBiEncoder)
	}
	m, err := model.NewBiEncoder(c.Encoder, c.SharedTowers, 0)
	if err != nil {
		return nil, BiEncoderMeta{}, fmt.Errorf("%s: %w", filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile), err)
	}
	if err := loadExactly(r.Checkpoint, m.Params()); err != nil {
		return nil, BiEncoderMeta{}, err
	}
	return m, BiEncoderMeta{Similarity: c.Similarity, Temperature: c.Temperature, MaxLength: c.MaxLength}, nil
}

func exportBiEncoder(r *Run, dir string, o Options) error {
	m, meta, err := r.BiEncoder()
	if err != nil {
		return err
	}
	meta.TruncateDim = o.TruncateDim
	if d := o.TruncateDim; d > 0 {
		warnUntrainedPrefix(r, d, o.Log)
	}
	meta.Carried = r.carriedTensors(m.Cfg, o.Log)
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	src := r.source()
	man, err := writeBiEncoder(dir, m, tok, meta, &src)
	if err != nil {
		return err
	}
	if o.Embeddings {
		if r.Recipe == nil {
			return fmt.Errorf("corpus embeddings need the run's recipe: %w", r.RecipeErr)
		}
		modelFile := filepath.Join(man.Towers["passage"], ModelFile)
		if err := writeCorpusEmbeddings(filepath.Join(dir, EmbeddingsDir), r, m.Passage, tok, meta, filepath.Join(dir, modelFile), modelFile); err != nil {
			return err
		}
		man.Embeddings = EmbeddingsDir
		if err := atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), man); err != nil {
			return err
		}
	}
	trunc := ""
	if meta.TruncateDim > 0 {
		trunc = fmt.Sprintf(", truncate_dim %d of %d", meta.TruncateDim, m.Passage.Dim())
	}
	fmt.Fprintf(o.Log, "export: %s bi-encoder (%s towers%s) from %s\n", m.Cfg.Encoder, towersWord(m.Shared), trunc, src.Checkpoint)
	return nil
}

// warnUntrainedPrefix warns when the run was not trained to serve its first d coordinates
// alone: only Matryoshka training (loss.name "matryoshka_infonce") with d among loss.dims does.
func warnUntrainedPrefix(r *Run, d int, log io.Writer) {
	switch {
	case r.Recipe == nil:
		fmt.Fprintf(log, "export: warning: truncate_dim %d: the run's recipe is unreadable (%v), so whether its first %d coordinates were trained to stand alone (Matryoshka) is unknown\n", d, r.RecipeErr, d)
	case r.Recipe.Loss.Name != "matryoshka_infonce":
		fmt.Fprintf(log, "export: warning: truncate_dim %d: the model was trained with loss.name = %q, not Matryoshka (\"matryoshka_infonce\"): its first %d coordinates were not trained to stand alone, expect a worse ranking than the full vectors'\n", d, r.Recipe.Loss.Name, d)
	case !slices.Contains(r.Recipe.Loss.Dims, d):
		fmt.Fprintf(log, "export: warning: truncate_dim %d is not among the trained Matryoshka prefixes loss.dims = %v\n", d, r.Recipe.Loss.Dims)
	}
}

func towersWord(shared bool) string {
	if shared {
		return "shared"
	}
	return "separate"
}

// WriteBiEncoder exports m into the new directory out (see the package documentation for
// the layout): one tower directory at the root when the towers are shared, query/ and
// passage/ otherwise, and ragtrain.json. out must not exist or be empty; it appears complete
// or not at all.
func WriteBiEncoder(out string, m *model.BiEncoder, tok *tokenize.Tokenizer, meta BiEncoderMeta) error {
	return writeDir(out, func(tmp string) error {
		_, err := writeBiEncoder(tmp, m, tok, meta, nil)
		return err
	})
}

func writeBiEncoder(dir string, m *model.BiEncoder, tok *tokenize.Tokenizer, meta BiEncoderMeta, src *Source) (*Manifest, error) {
	if tok.VocabSize() != m.Cfg.Vocab {
		return nil, fmt.Errorf("export: the tokenizer has %d tokens, the model's vocabulary is %d", tok.VocabSize(), m.Cfg.Vocab)
	}
	switch meta.Similarity {
	case "cosine", "dot":
	default:
		return nil, fmt.Errorf("export: similarity %q, want \"cosine\" or \"dot\"", meta.Similarity)
	}
	if d := meta.TruncateDim; d < 0 || d > m.Passage.Dim() {
		return nil, fmt.Errorf("export: truncate_dim %d, want 1..%d (the model's dimension) or 0 for all", d, m.Passage.Dim())
	}
	pooling := m.Cfg.Pooling
	if pooling == "" {
		pooling = model.PoolingMean
	}
	man := &Manifest{FormatVersion: ManifestFormat, Kind: KindBiEncoder, Encoder: m.Cfg.Encoder, SharedTowers: m.Shared,
		Towers: map[string]string{"query": ".", "passage": "."}, Pooling: pooling,
		Similarity: meta.Similarity, Temperature: meta.Temperature, MaxLength: meta.MaxLength, TruncateDim: meta.TruncateDim, Source: src}
	if m.Shared {
		if err := writeTower(dir, m.Query, tok, meta); err != nil {
			return nil, err
		}
	} else {
		man.Towers = map[string]string{"query": "query", "passage": "passage"}
		for _, t := range []*model.Tower{m.Query, m.Passage} {
			sub := filepath.Join(dir, t.Prefix)
			if err := os.Mkdir(sub, 0o755); err != nil {
				return nil, err
			}
			if err := writeTower(sub, t, tok, meta); err != nil {
				return nil, err
			}
		}
	}
	return man, atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), man)
}

// writeTower writes one tower directory: a BERT + sentence-transformers directory for a
// transformer, the documented bow layout for bow.
func writeTower(dir string, t *model.Tower, tok *tokenize.Tokenizer, meta BiEncoderMeta) error {
	var err error
	switch t.Cfg.Encoder {
	case model.EncoderTransformer:
		err = writeTransformerTower(dir, t, tok, meta)
	case model.EncoderBow:
		err = writeBowTower(dir, t, tok, meta)
	default:
		err = fmt.Errorf("export: encoder %q has no export layout", t.Cfg.Encoder)
	}
	if err != nil {
		return err
	}
	return writeTokenizerFiles(dir, tok, meta.MaxLength)
}

func writeTransformerTower(dir string, t *model.Tower, tok *tokenize.Tokenizer, meta BiEncoderMeta) error {
	cfg, err := newBertConfig(t.Cfg, tok.PadID())
	if err != nil {
		return err
	}
	ts, err := towerTensors(t, model.HFBertName)
	if err != nil {
		return err
	}
	if err := writeBertModel(dir, ts, meta.Carried, cfg); err != nil {
		return err
	}
	return writeSentenceTransformersDim(dir, t.Cfg, meta.MaxLength, meta.Similarity, meta.TruncateDim)
}

// The bow layout: model.safetensors holds the word embeddings under BertModel's name and the
// projection as "dense"; config.json says model_type "ragtrain-bow" so that no BERT loader
// mistakes it for a transformer.
var bowNames = map[string]string{
	"embeddings.word": "embeddings.word_embeddings.weight",
	"proj.weight":     "dense.weight",
	"proj.bias":       "dense.bias",
}

// bowName maps a bow parameter name (with its tower prefix) to its name in the bow layout.
func bowName(name string) (string, error) {
	_, rest, _ := strings.Cut(name, ".")
	if n, ok := bowNames[rest]; ok {
		return n, nil
	}
	return "", fmt.Errorf("export: parameter %q is not a bow parameter", name)
}

// bowConfig is the config.json of a bow tower.
type bowConfig struct {
	Architectures     []string `json:"architectures"`
	ModelType         string   `json:"model_type"`
	VocabSize         int      `json:"vocab_size"`
	HiddenSize        int      `json:"hidden_size"`
	Pooling           string   `json:"pooling"`
	HiddenDropoutProb float64  `json:"hidden_dropout_prob"`
	PadTokenID        int      `json:"pad_token_id"`
	TorchDtype        string   `json:"torch_dtype"`
}

func writeBowTower(dir string, t *model.Tower, tok *tokenize.Tokenizer, meta BiEncoderMeta) error {
	ts, err := towerTensors(t, bowName)
	if err != nil {
		return err
	}
	if err := writeSafetensorsPT(filepath.Join(dir, ModelFile), ts); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, ConfigFile), bowConfig{
		Architectures: []string{"RagtrainBowEncoder"}, ModelType: modelTypeBow, VocabSize: t.Cfg.Vocab,
		HiddenSize: t.Cfg.Hidden, Pooling: model.PoolingMean, HiddenDropoutProb: t.Cfg.Dropout,
		PadTokenID: tok.PadID(), TorchDtype: "float32",
	})
}
