package export

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

func init() { register(KindCrossEncoder, exportCrossEncoder) }

// KindCrossEncoder is the config.json "kind" of reranker checkpoints.
const KindCrossEncoder = model.KindCrossEncoder

// ReadmeFile is the note a cross-encoder export carries about where its model came from.
const ReadmeFile = "README.md"

// CrossEncoderManifest is the ragtrain.json of a cross-encoder export.
type CrossEncoderManifest struct {
	FormatVersion int    `json:"format_version"`
	Kind          string `json:"kind"`       // "cross-encoder"
	Encoder       string `json:"encoder"`    // "transformer"
	Pooling       string `json:"pooling"`    // "cls": the pooler reads the [CLS] state
	MaxLength     int    `json:"max_length"` // tokens of [CLS] query [SEP] passage [SEP]
	CrossEncoderMeta
	Source *Source `json:"source,omitempty"`
}

// CrossEncoderMeta is what a cross-encoder export records besides the weights and the
// tokenizer: how the model was trained (model.CrossEncoderConfig).
type CrossEncoderMeta struct {
	MaxLength  int    `json:"-"`           // tokens of [CLS] query [SEP] passage [SEP]
	Loss       string `json:"loss"`        // "pairwise", "listwise" or "pointwise"
	FirstStage string `json:"first_stage"` // what produced the training candidates: "bm25", a retriever checkpoint, a run file
	TrainDepth int    `json:"train_depth"` // first-stage hits per training query
	ListSize   int    `json:"list_size"`   // passages per training list
	// PretrainSteps are the cropping-list steps before the supervised ones; InitFrom the
	// directory the weights started from ("" for a random initialisation).
	PretrainSteps int    `json:"pretrain_steps"`
	InitFrom      string `json:"init_from,omitempty"`
}

// CrossEncoder rebuilds the run's cross-encoder from its checkpoint: the architecture from
// config.json, every parameter from model.safetensors (names and shapes must match exactly).
func (r *Run) CrossEncoder() (*model.CrossEncoder, CrossEncoderMeta, error) {
	var c model.CrossEncoderConfig
	if err := r.Checkpoint.DecodeConfig(&c); err != nil {
		return nil, CrossEncoderMeta{}, err
	}
	cfgPath := filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile)
	if c.Kind != KindCrossEncoder {
		return nil, CrossEncoderMeta{}, fmt.Errorf("%s: kind %q, want %q", cfgPath, c.Kind, KindCrossEncoder)
	}
	m, err := model.NewCrossEncoder(c.Encoder, 0)
	if err != nil {
		return nil, CrossEncoderMeta{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := loadExactly(r.Checkpoint, m.Params()); err != nil {
		return nil, CrossEncoderMeta{}, err
	}
	return m, CrossEncoderMeta{MaxLength: c.MaxLength, Loss: c.Loss, FirstStage: c.FirstStage, TrainDepth: c.TrainDepth,
		ListSize: c.ListSize, PretrainSteps: c.PretrainSteps, InitFrom: c.InitFrom}, nil
}

// exportCrossEncoder exports a reranker model directory (run/reranker-<loss>) or checkpoint. A
// reranker run directory holds one model per loss (and one for its pretraining phase), so given
// the run directory itself it names them rather than pick the last one trained. Options.Embeddings
// is for bi-encoders and is ignored: a cross-encoder has no corpus embeddings.
func exportCrossEncoder(r *Run, dir string, o Options) error {
	if models, _ := filepath.Glob(filepath.Join(r.Dir, "reranker-*", checkpoints.LatestFile)); len(models) > 0 {
		for i := range models {
			models[i] = filepath.Dir(models[i])
		}
		return fmt.Errorf("%s is a reranker run with %d models; export one of: %s", r.Dir, len(models), strings.Join(models, ", "))
	}
	m, meta, err := r.CrossEncoder()
	if err != nil {
		return err
	}
	tok, err := r.Tokenizer()
	if err != nil {
		return err
	}
	src := r.source()
	if err := writeCrossEncoder(dir, m, tok, meta, &src); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "export: cross-encoder (%s loss, first stage %s) from %s\n", meta.Loss, meta.FirstStage, src.Checkpoint)
	return nil
}

// WriteCrossEncoder exports m into the new directory out as a Hugging Face
// BertForSequenceClassification directory (see the package documentation for the layout).
// The model must pool by [CLS] (model.pooling = "cls"): BERT's pooler reads that state, and no
// Hugging Face head computes the masked mean. out must not exist or be empty; it appears
// complete or not at all.
func WriteCrossEncoder(out string, m *model.CrossEncoder, tok *tokenize.Tokenizer, meta CrossEncoderMeta) error {
	return writeDir(out, func(tmp string) error { return writeCrossEncoder(tmp, m, tok, meta, nil) })
}

// bertSeqClsConfig is the config.json of BertForSequenceClassification with one label: a
// regression-style head whose one logit is the relevance score.
type bertSeqClsConfig struct {
	bertConfig
	NumLabels        int               `json:"num_labels"`
	ID2Label         map[string]string `json:"id2label"`
	Label2ID         map[string]int    `json:"label2id"`
	ClassifierDrop   *float64          `json:"classifier_dropout"` // null: hidden_dropout_prob
	SentenceTransfor *stCrossEncoder   `json:"sentence_transformers,omitempty"`
}

// stCrossEncoder is the "sentence_transformers" entry of a CrossEncoder's config.json: the
// activation applied to the logit (Identity: scores are the raw logits, as ours are).
type stCrossEncoder struct {
	ActivationFn string `json:"activation_fn"`
}

func writeCrossEncoder(dir string, m *model.CrossEncoder, tok *tokenize.Tokenizer, meta CrossEncoderMeta, src *Source) error {
	if tok.VocabSize() != m.Cfg.Vocab {
		return fmt.Errorf("export: the tokenizer has %d tokens, the model's vocabulary is %d", tok.VocabSize(), m.Cfg.Vocab)
	}
	if p := m.Cfg.Pooling; p != model.PoolingCLS {
		if p == "" {
			p = model.PoolingMean
		}
		return fmt.Errorf(`export: the cross-encoder pools by %q, but BertForSequenceClassification's pooler reads the [CLS] state; train it with model.pooling = "cls" to export it`, p)
	}
	bc, err := newBertConfig(m.Cfg, tok.PadID())
	if err != nil {
		return err
	}
	bc.Architectures = []string{"BertForSequenceClassification"}
	cfg := bertSeqClsConfig{bertConfig: bc, NumLabels: 1,
		ID2Label: map[string]string{"0": "LABEL_0"}, Label2ID: map[string]int{"LABEL_0": 0},
		SentenceTransfor: &stCrossEncoder{ActivationFn: "torch.nn.modules.linear.Identity"}}
	var ts []checkpoints.Tensor
	for _, p := range m.Params() {
		n, err := model.HFCrossEncoderName(p.Name)
		if err != nil {
			return err
		}
		ts = append(ts, checkpoints.Tensor{Name: n, Shape: append([]int(nil), p.Value.Shape()...), Data: p.Value.Data().([]float32)})
	}
	if err := writeHFModel(dir, ts, cfg); err != nil {
		return err
	}
	if err := writeTokenizerFiles(dir, tok, meta.MaxLength); err != nil {
		return err
	}
	man := CrossEncoderManifest{FormatVersion: ManifestFormat, Kind: KindCrossEncoder, Encoder: m.Cfg.Encoder,
		Pooling: model.PoolingCLS, MaxLength: meta.MaxLength, CrossEncoderMeta: meta, Source: src}
	if err := atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), man); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ReadmeFile), []byte(crossEncoderReadme(m.Cfg, meta, src)))
}

// crossEncoderReadme is the export's README.md: what the model is, what trained it, how to load it.
func crossEncoderReadme(c model.EncoderConfig, meta CrossEncoderMeta, src *Source) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Cross-encoder reranker (ragtrain)\n\n")
	fmt.Fprintf(&b, "A BertForSequenceClassification with one label: the logit of `[CLS] query [SEP] passage [SEP]`\n")
	fmt.Fprintf(&b, "(token types 0 for the query, 1 for the passage; at most %d tokens, the passage cut first) is the\n", meta.MaxLength)
	fmt.Fprintf(&b, "relevance score; higher is more relevant. Transformer: %d layers, hidden %d, %d heads, FFN %d.\n\n", c.Layers, c.Hidden, c.Heads, c.FFN)
	fmt.Fprintf(&b, "Trained with the %s loss on lists of %d passages drawn from the top %d of the first stage\n", meta.Loss, meta.ListSize, meta.TrainDepth)
	fmt.Fprintf(&b, "`%s`", meta.FirstStage)
	if meta.PretrainSteps > 0 {
		fmt.Fprintf(&b, ", after %d steps of label-free cropping lists on the corpus", meta.PretrainSteps)
	}
	if meta.InitFrom != "" {
		fmt.Fprintf(&b, ", starting from the weights of `%s`", meta.InitFrom)
	}
	fmt.Fprintf(&b, ". It reranks that first stage's candidates.\n")
	if src != nil {
		fmt.Fprintf(&b, "\nExported from `%s` (%s, step %d).\n", src.Checkpoint, src.Phase, src.Step)
	}
	fmt.Fprintf(&b, "\n    from sentence_transformers import CrossEncoder\n    CrossEncoder(DIR, max_length=%d).predict([(query, passage)])\n", meta.MaxLength)
	return b.String()
}

// CrossEncoderDir is a cross-encoder on disk, opened by OpenCrossEncoder: the architecture the
// directory describes and its tensors, ready to be copied into a model by Init.
type CrossEncoderDir struct {
	Dir    string
	Layout string // LayoutExport, LayoutHuggingFace or LayoutRun
	// Encoder is the architecture the directory describes (Pooling "cls" for a BERT directory).
	Encoder model.EncoderConfig
	// MaxLength is the pair length the model was trained with, 0 when the directory does not say.
	MaxLength int
	// Tokenizer is the path of the directory's tokenizer.json, "" when it has none;
	// LoadTokenizer also reads a directory that has only vocab.txt and tokenizer_config.json.
	Tokenizer string
	// Ignored lists tensors that are not parameters and are skipped by design (the
	// embeddings.position_ids buffer; for a body, BERT's pre-training heads cls.*), as
	// "file: name".
	Ignored []string
	// Body is true when the directory holds an encoder without a cross-encoder's head: a
	// BertModel or sentence-transformers directory, or a bi-encoder (export or run) with one
	// shared tower (OpenBiEncoder's layouts). Init then copies the encoder and, when the
	// directory has BERT's pooler (pooler.dense.weight and .bias, as BertModel saves them), the
	// pooler; Fresh names the parameters it leaves as the model initialised them.
	Body bool
	// Fresh lists, in model order, the parameters the directory has no tensor for and Init does
	// not touch: classifier.weight and classifier.bias of a body, and pooler.weight and
	// pooler.bias of a body without BERT's pooler. Empty for a cross-encoder directory.
	Fresh []string

	set    *tensorSet
	name   func(param string) (string, error) // the tensor name of a model parameter
	tokDir string                             // the directory of the tokenizer files
}

// LoadTokenizer loads the directory's tokenizer as BiEncoderDir.LoadTokenizer does.
func (d *CrossEncoderDir) LoadTokenizer() (*tokenize.Tokenizer, string, error) {
	return loadDirTokenizer(d.Dir, d.tokDir)
}

// InitCrossEncoder opens dir (OpenCrossEncoder) and copies its tensors into m (Init).
func InitCrossEncoder(m *model.CrossEncoder, dir string) (*CrossEncoderDir, error) {
	return openInit(OpenCrossEncoder, m, dir)
}

// OpenCrossEncoder reads a cross-encoder directory in any of these layouts:
//
//   - an export (Export or WriteCrossEncoder) or any Hugging Face BertForSequenceClassification
//     directory with one label: config.json with model_type "bert" and model.safetensors (or,
//     without it, pytorch_model.bin) with the names bert.embeddings.*, bert.encoder.layer.N.*,
//     bert.pooler.dense.*, classifier.* (F16, BF16 and F64 are converted to float32);
//   - a reranker run directory's model (run/reranker-<loss>, whose latest checkpoint is read),
//     one of its checkpoint directories, or a run directory whose latest checkpoint is a
//     reranker's;
//   - an encoder body (Body): a Hugging Face BERT directory without a classifier (BertModel,
//     a sentence-transformers model such as all-MiniLM-L6-v2, a BertFor* pre-training
//     checkpoint: model.safetensors holds no classifier.* tensor), a bi-encoder export with one
//     shared tower, or a bi-encoder run; read by OpenBiEncoder, plus BERT's pooler.dense.* when
//     the safetensors file has it.
//
// Errors name the file and field at fault.
func OpenCrossEncoder(dir string) (*CrossEncoderDir, error) {
	if err := checkUnfinished(dir); err != nil {
		return nil, err
	}
	switch {
	case exists(filepath.Join(dir, checkpoints.LatestFile)) || exists(filepath.Join(dir, checkpoints.TrainerFile)):
		return openRunCrossEncoder(dir)
	case exists(filepath.Join(dir, ManifestFile)):
		var man struct {
			Kind string `json:"kind"`
		}
		if err := readJSON(filepath.Join(dir, ManifestFile), &man, false); err != nil {
			return nil, err
		}
		if man.Kind == KindBiEncoder {
			return openBodyCrossEncoder(dir, nil)
		}
		return openHFCrossEncoder(dir)
	case exists(filepath.Join(dir, ConfigFile)):
		return openHFCrossEncoder(dir)
	}
	return nil, fmt.Errorf("%s: not a model directory: no %s (Hugging Face or export), %s or %s (run)",
		dir, ConfigFile, checkpoints.LatestFile, checkpoints.TrainerFile)
}

func openRunCrossEncoder(dir string) (*CrossEncoderDir, error) {
	r, err := OpenRun(dir)
	if err != nil {
		return nil, err
	}
	if r.Kind == KindBiEncoder {
		return openBodyCrossEncoder(dir, nil)
	}
	var c model.CrossEncoderConfig
	if err := r.kindConfig(KindCrossEncoder, &c); err != nil {
		return nil, err
	}
	set := checkpointSet(r.Checkpoint, "")
	return &CrossEncoderDir{Dir: dir, Layout: LayoutRun, Encoder: c.Encoder, MaxLength: c.MaxLength, tokDir: r.Checkpoint.Dir,
		Tokenizer: fileIfExists(filepath.Join(r.Checkpoint.Dir, checkpoints.TokenizerFile)),
		set:       set, name: func(p string) (string, error) { return p, nil }}, nil
}

func openHFCrossEncoder(dir string) (*CrossEncoderDir, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	var c bertSeqClsConfig
	if err := readJSON(cfgPath, &c, false); err != nil {
		return nil, err
	}
	if c.ModelType != modelTypeBert {
		return nil, fmt.Errorf("%s: model_type %q; a cross-encoder directory is a BERT (%q)", cfgPath, c.ModelType, modelTypeBert)
	}
	path, raw, err := readRawWeights(dir)
	if err != nil {
		return nil, err
	}
	if !exists(filepath.Join(dir, ManifestFile)) && !slices.ContainsFunc(raw, func(r checkpoints.RawTensor) bool {
		return strings.HasPrefix(r.Name, "classifier.")
	}) {
		pooler, err := bertPooler(path, raw)
		if err != nil {
			return nil, err
		}
		return openBodyCrossEncoder(dir, pooler)
	}
	if n := max(c.NumLabels, len(c.ID2Label)); n != 1 {
		return nil, fmt.Errorf("%s: %d labels (num_labels, id2label); a reranker has one score (num_labels = 1)", cfgPath, n)
	}
	enc, err := c.encoderConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	enc.Pooling = model.PoolingCLS
	d := &CrossEncoderDir{Dir: dir, Layout: LayoutHuggingFace, Encoder: enc, tokDir: dir,
		Tokenizer: fileIfExists(filepath.Join(dir, TokenizerFile)), name: model.HFCrossEncoderName,
		set: newTensorSet(path)}
	if exists(filepath.Join(dir, ManifestFile)) {
		var man CrossEncoderManifest
		if err := readJSON(filepath.Join(dir, ManifestFile), &man, true); err != nil {
			return nil, err
		}
		if man.Kind != KindCrossEncoder {
			return nil, fmt.Errorf("%s: kind %q, want %q", filepath.Join(dir, ManifestFile), man.Kind, KindCrossEncoder)
		}
		if man.MaxLength < 0 {
			return nil, fmt.Errorf("%s: max_length = %d, want a length >= 1 (or 0: not given)", filepath.Join(dir, ManifestFile), man.MaxLength)
		}
		d.Layout, d.MaxLength = LayoutExport, man.MaxLength
	}
	for _, r := range raw {
		if strings.HasSuffix(r.Name, "embeddings.position_ids") {
			d.Ignored = append(d.Ignored, path+": "+r.Name)
			continue
		}
		data, err := toFloat32(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		d.set.add(checkpoints.Tensor{Name: r.Name, Shape: r.Shape, Data: data})
	}
	return d, nil
}

// bertPooler returns BERT's pooler from the tensors raw of the file at path, named
// pooler.dense.weight and pooler.dense.bias (without the "bert." prefix of BertFor* models),
// converted to float32; nil when the file has neither.
func bertPooler(path string, raw []checkpoints.RawTensor) ([]checkpoints.Tensor, error) {
	var out []checkpoints.Tensor
	for _, r := range raw {
		name := strings.TrimPrefix(r.Name, "bert.")
		if name != "pooler.dense.weight" && name != "pooler.dense.bias" {
			continue
		}
		data, err := toFloat32(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, checkpoints.Tensor{Name: name, Shape: r.Shape, Data: data})
	}
	return out, nil
}

// openBodyCrossEncoder opens an encoder body (OpenBiEncoder's layouts, one shared transformer
// tower) as the start of a cross-encoder; pooler holds BERT's pooler.dense.weight and .bias
// when the directory has them (bertPooler), else nil: the pooler is then fresh, with the
// classifier.
func openBodyCrossEncoder(dir string, pooler []checkpoints.Tensor) (*CrossEncoderDir, error) {
	bd, err := OpenBiEncoder(dir)
	if err != nil {
		return nil, err
	}
	if bd.Encoder.Encoder != model.EncoderTransformer {
		return nil, fmt.Errorf("%s holds a %s encoder; a cross-encoder's body is a transformer", dir, bd.Encoder.Encoder)
	}
	if bd.Encoder.Causal {
		return nil, fmt.Errorf("%s holds a causal transformer; a cross-encoder's query and passage must see each other", dir)
	}
	if !bd.Shared {
		return nil, fmt.Errorf("%s has separate query and passage towers; a cross-encoder reads the pair with one body (name one tower's directory)", dir)
	}
	enc := bd.Encoder
	enc.Pooling = model.PoolingCLS
	src := bd.query
	d := &CrossEncoderDir{Dir: dir, Layout: bd.Layout, Encoder: enc, Tokenizer: bd.Tokenizer, Body: true, set: src.set, tokDir: bd.tokDir}
	used := map[string]bool{}
	for _, t := range pooler {
		src.set.add(t)
		used[t.Name] = true
	}
	for _, ig := range bd.Ignored {
		_, name, _ := strings.Cut(ig, ": ")
		if !used[strings.TrimPrefix(name, "bert.")] {
			d.Ignored = append(d.Ignored, ig)
		}
	}
	heads := map[string]string{model.PoolerWeight: "pooler.dense.weight", model.PoolerBias: "pooler.dense.bias"}
	if len(pooler) == 0 {
		d.Fresh = append(d.Fresh, model.PoolerWeight, model.PoolerBias)
	}
	d.Fresh = append(d.Fresh, model.ClassifierWeight, model.ClassifierBias)
	d.name = func(p string) (string, error) {
		if n, ok := heads[p]; ok {
			return n, nil
		}
		rest, ok := strings.CutPrefix(p, model.PrefixShared+".")
		if !ok {
			return "", fmt.Errorf("model: parameter %q is not a cross-encoder parameter", p)
		}
		return src.name(rest), nil
	}
	return d, nil
}

// Init copies the directory's tensors into m, bit for bit, except the parameters of Fresh,
// which keep m's values. The encoder must be a transformer with the directory's number of
// heads. Every other parameter of m must find a tensor of its shape and every tensor a
// parameter (Ignored aside); otherwise the error is a *MismatchError listing each missing,
// unexpected and wrongly shaped tensor with both shapes, and m may be partly overwritten.
// Pooling, dropout and the maximum length are the model's own.
func (d *CrossEncoderDir) Init(m *model.CrossEncoder) error {
	if m.Cfg.Heads != d.Encoder.Heads {
		return fmt.Errorf("%s has %d attention heads; the model has %d (model.heads)", d.Dir, d.Encoder.Heads, m.Cfg.Heads)
	}
	var mm MismatchError
	for _, p := range m.Params() {
		if slices.Contains(d.Fresh, p.Name) {
			continue
		}
		n, err := d.name(p.Name)
		if err != nil {
			return err
		}
		d.set.fill(p, n, &mm)
	}
	d.set.leftovers(&mm)
	d.set.used = nil // Init may run again (one model per loss)
	return mm.err(d.Dir)
}
