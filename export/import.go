package export

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// Layouts OpenBiEncoder recognises.
const (
	LayoutExport      = "export"      // a directory written by Export / WriteBiEncoder (ragtrain.json)
	LayoutHuggingFace = "huggingface" // a plain BERT (or bow) model directory: config.json + model.safetensors
	LayoutRun         = "run"         // a run directory or one of its checkpoint directories
)

// BiEncoderDir is a bi-encoder on disk, opened by OpenBiEncoder: what the directory says about
// the architecture, and its tensors, ready to be copied into a model by Init.
type BiEncoderDir struct {
	Dir    string
	Layout string // LayoutExport, LayoutHuggingFace or LayoutRun
	// Encoder is the architecture the directory describes. Pooling is "" when the directory does
	// not say (a BERT directory without 1_Pooling/config.json).
	Encoder model.EncoderConfig
	Shared  bool // one tower for queries and passages
	// Similarity ("cosine" or "dot") and MaxLength (tokens, [CLS] and [SEP] included) are "" and
	// 0 when the directory does not say. A sentence-transformers directory always says: its
	// config_sentence_transformers.json's similarity_fn_name, sentence-transformers' default
	// "cosine" when that field or the file is absent (older releases wrote none), and
	// sentence_bert_config.json's max_seq_length, or when it has none (sentence-transformers 6
	// writes none) min(tokenizer_config.json's model_max_length, max_position_embeddings), as
	// sentence-transformers computes it.
	Similarity string
	MaxLength  int
	// Normalize is set when the directory's modules.json ends with a Normalize module:
	// sentence-transformers L2-normalises each embedding, so its vectors are the tower's pooled
	// vectors divided by their norm (cosine scores are unchanged by it, dot scores are not).
	// False for run directories and directories without modules.json.
	Normalize bool
	// Tokenizer is the path of the directory's tokenizer.json, "" when it has none; LoadTokenizer
	// also reads a directory that has only vocab.txt and tokenizer_config.json.
	Tokenizer string
	// Ignored lists tensors of the files that are not encoder parameters and are skipped by
	// design: BERT's pooler and pre-training heads (pooler.*, cls.*) and the
	// embeddings.position_ids buffer, as "file: name".
	Ignored []string

	query, passage *towerSource
	tokDir         string // the directory of the tokenizer files, "" when unknown
}

// LoadTokenizer loads the tokenizer the directory's weights were trained with, whichever files
// hold it (tokenize.LoadDir on the directory of the model's tokenizer files: tokenizer.json, else
// vocab.txt with tokenizer_config.json and special_tokens_map.json), and returns it with the
// files it was read from, in words. A directory with neither tokenizer.json nor vocab.txt is an
// error naming the directory.
func (d *BiEncoderDir) LoadTokenizer() (*tokenize.Tokenizer, string, error) {
	return loadDirTokenizer(d.Dir, d.tokDir)
}

// loadDirTokenizer is LoadTokenizer for a model directory dir whose tokenizer files are in tokDir.
func loadDirTokenizer(dir, tokDir string) (*tokenize.Tokenizer, string, error) {
	if tokDir == "" {
		return nil, "", fmt.Errorf("%s: no tokenizer files (%s, or %s with %s)", dir, TokenizerFile, tokenize.VocabFile, TokenizerConfigFile)
	}
	tok, what, err := tokenize.LoadDir(tokDir)
	if err != nil {
		return nil, "", err
	}
	return tok, what, nil
}

// towerSource is where one tower's parameters are: a tensor set and the name of parameter
// <prefix>.rest in it.
type towerSource struct {
	set  *tensorSet
	name func(rest string) string
}

// InitBiEncoder opens dir (OpenBiEncoder) and copies its tensors into m (Init).
func InitBiEncoder(m *model.BiEncoder, dir string) (*BiEncoderDir, error) {
	return openInit(OpenBiEncoder, m, dir)
}

// openInit opens dir with open and copies its tensors into m with the opened directory's Init
// (InitBiEncoder, InitCrossEncoder, InitReader).
func openInit[D interface{ Init(M) error }, M any](open func(string) (D, error), m M, dir string) (D, error) {
	d, err := open(dir)
	if err != nil {
		return d, err
	}
	return d, d.Init(m)
}

// OpenBiEncoder reads a bi-encoder directory in any of these layouts:
//
//   - an export (ragtrain.json at the root, written by Export or WriteBiEncoder), shared or
//     with query/ and passage/ tower directories;
//   - a Hugging Face BERT directory (config.json with model_type "bert" and model.safetensors,
//     or without it pytorch_model.bin, with BertModel names, optionally prefixed "bert." as
//     BertFor* models save them), used as a shared tower; F16, BF16 and F64 tensors are
//     converted to float32; a sentence-transformers directory as distributed (modules.json:
//     Transformer at "" or a subdirectory, Pooling mean or cls, optionally Normalize; see the
//     package documentation);
//   - a bow tower directory (config.json with model_type "ragtrain-bow");
//   - a run directory (its latest checkpoint) or a checkpoint directory.
//
// Errors name the file and field at fault. Two tensors whose names coincide once "bert." is
// removed, a similarity (similarity_fn_name, ragtrain.json's similarity) other than "cosine" or
// "dot", a max_seq_length below 1, a config.json this toolkit does not compute
// (bertConfig.encoderConfig's list), and a modules.json listing other modules than Transformer,
// Pooling (mean or cls) and Normalize are errors.
//
// Every size config.json states is compared with the tensors of the weights file before the
// directory is returned (checkSizes), so that a model built from d.Encoder is no larger than
// the file.
func OpenBiEncoder(dir string) (*BiEncoderDir, error) {
	if err := checkUnfinished(dir); err != nil {
		return nil, err
	}
	d, err := openBiEncoder(dir)
	if err != nil {
		return nil, err
	}
	if err := d.checkSizes(); err != nil {
		return nil, err
	}
	return d, nil
}

func openBiEncoder(dir string) (*BiEncoderDir, error) {
	switch {
	case exists(filepath.Join(dir, checkpoints.LatestFile)) || exists(filepath.Join(dir, checkpoints.TrainerFile)):
		return openRunBiEncoder(dir)
	case exists(filepath.Join(dir, ManifestFile)):
		return openExport(dir)
	case exists(filepath.Join(dir, ConfigFile)) || exists(filepath.Join(dir, ModulesFile)):
		tw, err := readTowerDir(dir)
		if err != nil {
			return nil, err
		}
		d := &BiEncoderDir{Dir: dir, Layout: LayoutHuggingFace, Encoder: tw.cfg, Shared: true, Ignored: tw.ignored,
			Normalize: tw.normalize, query: tw.src, passage: tw.src, tokDir: tw.modelDir,
			Tokenizer: fileIfExists(filepath.Join(tw.modelDir, TokenizerFile))}
		if d.Similarity, err = readSimilarity(dir); err != nil {
			return nil, err
		}
		if d.Similarity == "" && tw.st {
			d.Similarity = stDefaultSimilarity
		}
		if d.MaxLength, err = readMaxLength(tw.modelDir); err != nil {
			return nil, err
		}
		if d.MaxLength == 0 && tw.st && tw.cfg.Encoder == model.EncoderTransformer {
			if d.MaxLength, err = stMaxLength(tw.modelDir, tw.cfg.MaxPosition); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	return nil, fmt.Errorf("%s: not a model directory: no %s (export), %s (Hugging Face), %s or %s (run)",
		dir, ManifestFile, ConfigFile, checkpoints.LatestFile, checkpoints.TrainerFile)
}

func openExport(dir string) (*BiEncoderDir, error) {
	path := filepath.Join(dir, ManifestFile)
	var man Manifest
	if err := readJSON(path, &man, true); err != nil {
		return nil, err
	}
	if man.FormatVersion != ManifestFormat {
		return nil, fmt.Errorf("%s: format_version %d, this build reads %d", path, man.FormatVersion, ManifestFormat)
	}
	if man.Kind != KindBiEncoder {
		return nil, fmt.Errorf("%s: kind %q, want %q", path, man.Kind, KindBiEncoder)
	}
	if err := checkSimilarity(path, "similarity", man.Similarity); err != nil {
		return nil, err
	}
	if man.MaxLength < 0 {
		return nil, fmt.Errorf("%s: max_length = %d, want a length >= 1 (or 0: not given)", path, man.MaxLength)
	}
	d := &BiEncoderDir{Dir: dir, Layout: LayoutExport, Shared: man.SharedTowers, Similarity: man.Similarity, MaxLength: man.MaxLength}
	towers := map[string]*towerSource{}
	for _, role := range []string{"query", "passage"} {
		rel, ok := man.Towers[role]
		if !ok || filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
			return nil, fmt.Errorf("%s: towers.%s = %q, want a directory inside the export", path, role, rel)
		}
		if t, ok := towers[rel]; ok {
			if role == "query" {
				d.query = t
			} else {
				d.passage = t
			}
			continue
		}
		tw, err := readTowerDir(filepath.Join(dir, rel))
		if err != nil {
			return nil, err
		}
		if tw.cfg.Encoder != man.Encoder {
			return nil, fmt.Errorf("%s: encoder %q, but tower %s holds a %s encoder", path, man.Encoder, rel, tw.cfg.Encoder)
		}
		towers[rel] = tw.src
		d.Ignored = append(d.Ignored, tw.ignored...)
		if role == "query" {
			d.query, d.Encoder, d.Normalize, d.tokDir = tw.src, tw.cfg, tw.normalize, tw.modelDir
			d.Tokenizer = fileIfExists(filepath.Join(tw.modelDir, TokenizerFile))
		} else {
			d.passage = tw.src
		}
	}
	if man.SharedTowers != (d.query == d.passage) {
		return nil, fmt.Errorf("%s: shared_towers = %v, but towers = %v", path, man.SharedTowers, man.Towers)
	}
	if d.Encoder.Pooling == "" {
		d.Encoder.Pooling = man.Pooling
	}
	return d, nil
}

func openRunBiEncoder(dir string) (*BiEncoderDir, error) {
	r, err := OpenRun(dir)
	if err != nil {
		return nil, err
	}
	var c model.BiEncoderConfig
	if err := r.kindConfig(KindBiEncoder, &c); err != nil {
		return nil, err
	}
	set := checkpointSet(r.Checkpoint, "")
	prefixed := func(prefix string) *towerSource {
		return &towerSource{set: set, name: func(rest string) string { return prefix + "." + rest }}
	}
	d := &BiEncoderDir{Dir: dir, Layout: LayoutRun, Encoder: c.Encoder, Shared: c.SharedTowers,
		Similarity: c.Similarity, MaxLength: c.MaxLength, tokDir: r.Checkpoint.Dir,
		Tokenizer: fileIfExists(filepath.Join(r.Checkpoint.Dir, checkpoints.TokenizerFile))}
	if c.SharedTowers {
		d.query = prefixed(model.PrefixShared)
		d.passage = d.query
	} else {
		d.query, d.passage = prefixed(model.PrefixQuery), prefixed(model.PrefixPassage)
	}
	return d, nil
}

// towerDir is what readTowerDir finds in one tower directory.
type towerDir struct {
	src     *towerSource
	cfg     model.EncoderConfig
	ignored []string
	// modelDir holds config.json, the weights and the tokenizer files: the tower directory, or
	// the subdirectory of modules.json's Transformer module.
	modelDir  string
	st        bool // the directory has a modules.json
	normalize bool // modules.json ends with Normalize
}

// readTowerDir reads one tower directory: modules.json when present (readModules), then the
// Transformer's config.json (model_type "bert" or "ragtrain-bow"), weights (model.safetensors,
// else pytorch_model.bin) and, for BERT, the Pooling module's config.json (modules.json's, else
// 1_Pooling/config.json when present).
func readTowerDir(dir string) (*towerDir, error) {
	pipe, err := readModules(dir)
	if err != nil {
		return nil, err
	}
	tw := &towerDir{modelDir: dir}
	pooling := filepath.Join(dir, PoolingConfigFile)
	if pipe != nil {
		tw.modelDir, pooling, tw.st, tw.normalize = pipe.transformer, pipe.pooling, true, pipe.normalize
	}
	cfg, bert, name, err := readTowerConfigAt(tw.modelDir, pooling)
	if err != nil {
		return nil, err
	}
	set, ignored, err := readModelTensors(tw.modelDir, bert)
	if err != nil {
		return nil, err
	}
	tw.src, tw.cfg, tw.ignored = &towerSource{set: set, name: name}, cfg, ignored
	return tw, nil
}

// readTowerConfig is readTowerConfigAt with the pooling of dir/1_Pooling/config.json.
func readTowerConfig(dir string) (model.EncoderConfig, bool, func(string) string, error) {
	return readTowerConfigAt(dir, filepath.Join(dir, PoolingConfigFile))
}

// readTowerConfigAt reads and validates the config.json of dir (and, for BERT, the Pooling
// module's config file pooling when it exists): the encoder, whether it is a BERT, and the
// parameter naming.
func readTowerConfigAt(dir, pooling string) (model.EncoderConfig, bool, func(string) string, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := readJSON(cfgPath, &head, false); err != nil {
		return model.EncoderConfig{}, false, nil, err
	}
	var cfg model.EncoderConfig
	var name func(string) string
	switch head.ModelType {
	case modelTypeBert:
		var bc bertConfig
		if err := readJSON(cfgPath, &bc, false); err != nil {
			return cfg, false, nil, err
		}
		var err error
		if cfg, err = bc.encoderConfig(cfgPath); err != nil {
			return cfg, false, nil, err
		}
		if exists(pooling) {
			if cfg.Pooling, err = readPoolingFile(pooling, cfg.Hidden); err != nil {
				return cfg, false, nil, err
			}
		}
		name = func(rest string) string {
			n, err := model.HFBertName(model.PrefixShared + "." + rest)
			if err != nil {
				return rest
			}
			return n
		}
	case modelTypeBow:
		var bc bowConfig
		if err := readJSON(cfgPath, &bc, true); err != nil {
			return cfg, false, nil, err
		}
		if bc.Pooling != model.PoolingMean {
			return cfg, false, nil, fmt.Errorf("%s: pooling = %q, a bow encoder averages its tokens (\"mean\")", cfgPath, bc.Pooling)
		}
		cfg = model.EncoderConfig{Encoder: model.EncoderBow, Vocab: bc.VocabSize, Hidden: bc.HiddenSize,
			Dropout: bc.HiddenDropoutProb, Pooling: model.PoolingMean}
		if err := cfg.Validate(); err != nil {
			return cfg, false, nil, fmt.Errorf("%s: %w", cfgPath, err)
		}
		name = func(rest string) string {
			if n, ok := bowNames[rest]; ok {
				return n
			}
			return rest
		}
	default:
		return cfg, false, nil, fmt.Errorf("%s: model_type %q; this toolkit reads %q (transformer) and %q (bow)", cfgPath, head.ModelType, modelTypeBert, modelTypeBow)
	}
	return cfg, head.ModelType == modelTypeBert, name, nil
}

// readModelTensors reads the weights of a model directory (readRawWeights) into a tensor set,
// converting F16, BF16 and F64 tensors to float32. With bert, a "bert." prefix (BertFor*
// checkpoints) is removed, and two tensors whose names then coincide are an error naming both;
// the tensors that are not part of BertModel's encoder (pooler.*, cls.*,
// embeddings.position_ids) are skipped and returned.
func readModelTensors(dir string, bert bool) (*tensorSet, []string, error) {
	path, raw, err := readRawWeights(dir)
	if err != nil {
		return nil, nil, err
	}
	return tensorSetOf(path, raw, bert)
}

// readRawWeights reads the weights of a Hugging Face model directory: model.safetensors, or
// when the directory has none pytorch_model.bin (readTorchStateDict), and returns the path read.
// A sharded checkpoint (model.safetensors.index.json, pytorch_model.bin.index.json) and a
// directory with neither file are errors naming the directory and the files.
func readRawWeights(dir string) (string, []checkpoints.RawTensor, error) {
	path := filepath.Join(dir, ModelFile)
	_, err := os.Stat(path)
	switch {
	case err == nil:
		raw, _, err := checkpoints.ReadSafetensorsRaw(path)
		return path, raw, err
	case !errors.Is(err, fs.ErrNotExist):
		return "", nil, err
	}
	if bin := filepath.Join(dir, PyTorchFile); exists(bin) {
		raw, err := readTorchStateDict(bin)
		return bin, raw, err
	}
	for _, other := range []string{ModelFile + ".index.json", PyTorchFile + ".index.json"} {
		if exists(filepath.Join(dir, other)) {
			return "", nil, fmt.Errorf("%s: missing; the directory holds %s, and only single-file checkpoints are read (%s or %s; save with save_pretrained(dir, max_shard_size=\"100GB\"))", path, other, ModelFile, PyTorchFile)
		}
	}
	return "", nil, fmt.Errorf("%s: missing, and there is no %s either", path, PyTorchFile)
}

// tensorSetOf is readModelTensors on the tensors raw of the file at path.
func tensorSetOf(path string, raw []checkpoints.RawTensor, bert bool) (*tensorSet, []string, error) {
	prefixed := false
	for _, r := range raw {
		if strings.HasPrefix(r.Name, "bert.embeddings.") {
			prefixed = true
		}
	}
	set := newTensorSet(path)
	var ignored []string
	orig := make(map[string]string, len(raw)) // name after stripping -> name in the file
	for _, r := range raw {
		name := r.Name
		if bert && prefixed {
			name = strings.TrimPrefix(name, "bert.")
		}
		if first, dup := orig[name]; dup {
			return nil, nil, fmt.Errorf("%s: tensors %q and %q are both %q once the \"bert.\" prefix is removed", path, first, r.Name, name)
		}
		orig[name] = r.Name
		if bert && (name == "embeddings.position_ids" || strings.HasPrefix(name, "pooler.") || strings.HasPrefix(name, "cls.")) {
			ignored = append(ignored, path+": "+r.Name)
			continue
		}
		data, err := toFloat32(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		set.add(checkpoints.Tensor{Name: name, Shape: r.Shape, Data: data})
	}
	return set, ignored, nil
}

// toFloat32 converts a floating-point tensor to float32 (exactly for F16 and BF16).
func toFloat32(r checkpoints.RawTensor) ([]float32, error) {
	switch r.DType {
	case checkpoints.F32:
		return r.Float32()
	case checkpoints.F64:
		f, err := r.Float64()
		out := make([]float32, len(f))
		for i, v := range f {
			out[i] = float32(v)
		}
		return out, err
	case checkpoints.BF16:
		out := make([]float32, len(r.Data)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(r.Data[2*i:])) << 16)
		}
		return out, nil
	case checkpoints.F16:
		out := make([]float32, len(r.Data)/2)
		for i := range out {
			out[i] = halfToFloat32(binary.LittleEndian.Uint16(r.Data[2*i:]))
		}
		return out, nil
	}
	return nil, fmt.Errorf("tensor %q: dtype %s, want a floating-point type (F32, F16, BF16, F64)", r.Name, r.DType)
}

// halfToFloat32 converts an IEEE 754 binary16 value exactly (gguf.HalfToFloat).
func halfToFloat32(h uint16) float32 { return gguf.HalfToFloat(h) }

// Init copies the directory's tensors into m, bit for bit. The encoder kind and (for a
// transformer) the number of heads must match; a directory with one shared tower initialises
// both towers of a model with separate ones (as DPR starts both from one BERT), the reverse is
// an error. Every parameter of m must find a tensor of its shape and every tensor of the
// directory a parameter (Ignored aside); otherwise the error is a *MismatchError listing each
// missing, unexpected and wrongly shaped tensor, and m may be partly overwritten. Pooling,
// dropout and the maximum length are the model's own: they have no parameters.
func (d *BiEncoderDir) Init(m *model.BiEncoder) error {
	if m.Cfg.Encoder != d.Encoder.Encoder {
		return fmt.Errorf("%s holds a %s encoder; the model is %s (model.encoder)", d.Dir, d.Encoder.Encoder, m.Cfg.Encoder)
	}
	if m.Cfg.Encoder == model.EncoderTransformer && m.Cfg.Heads != d.Encoder.Heads {
		return fmt.Errorf("%s has %d attention heads; the model has %d (model.heads)", d.Dir, d.Encoder.Heads, m.Cfg.Heads)
	}
	if m.Cfg.Causal != d.Encoder.Causal {
		return fmt.Errorf("%s: causal = %v; the model has causal = %v", d.Dir, d.Encoder.Causal, m.Cfg.Causal)
	}
	if m.Shared && !d.Shared {
		return fmt.Errorf("%s has separate query and passage towers; the model shares one (set model.shared_towers = false)", d.Dir)
	}
	var mm MismatchError
	fill := func(t *model.Tower, src *towerSource) {
		for _, p := range t.Params() {
			_, rest, _ := strings.Cut(p.Name, ".")
			src.set.fill(p, src.name(rest), &mm)
		}
	}
	fill(m.Query, d.query)
	if !m.Shared {
		fill(m.Passage, d.passage)
	}
	d.query.set.leftovers(&mm)
	if d.passage.set != d.query.set {
		d.passage.set.leftovers(&mm)
	}
	return mm.err(d.Dir)
}

// loadExactly copies the checkpoint's tensors into params by name: every parameter must find
// its tensor with its shape, and every tensor a parameter; otherwise a MismatchError naming
// the checkpoint's directory and what is missing, unexpected or of another shape.
func loadExactly(ck *checkpoints.Checkpoint, params []*model.Param) error {
	src := checkpointSet(ck, "")
	var mm MismatchError
	for _, p := range params {
		src.fill(p, p.Name, &mm)
	}
	src.leftovers(&mm)
	return mm.err(ck.Dir)
}

// tensorSet is the tensors of one file, by name, with the names used so far.
type tensorSet struct {
	file   string
	byName map[string]checkpoints.Tensor
	order  []string
	used   map[string]bool
}

func newTensorSet(file string) *tensorSet {
	return &tensorSet{file: file, byName: map[string]checkpoints.Tensor{}}
}

// kindConfig decodes the model config of r's checkpoint into c (a pointer) after checking that
// the run holds a model of kind.
func (r *Run) kindConfig(kind string, c any) error {
	if r.Kind != kind {
		return fmt.Errorf("%s: holds a %s, not a %s", r.Checkpoint.Dir, r.Kind, kind)
	}
	return r.Checkpoint.DecodeConfig(c)
}

// checkpointSet is the set of ck's parameters whose names start with prefix ("": all), in the
// checkpoint's order.
func checkpointSet(ck *checkpoints.Checkpoint, prefix string) *tensorSet {
	set := newTensorSet(filepath.Join(ck.Dir, checkpoints.ModelFile))
	for _, t := range ck.Params {
		if strings.HasPrefix(t.Name, prefix) {
			set.add(t)
		}
	}
	return set
}

func (s *tensorSet) add(t checkpoints.Tensor) {
	s.byName[t.Name] = t
	s.order = append(s.order, t.Name)
}

// fill copies the tensor called name into p, or records why it cannot.
func (s *tensorSet) fill(p *model.Param, name string, mm *MismatchError) {
	want := []int(p.Value.Shape())
	t, ok := s.byName[name]
	if !ok {
		mm.Missing = append(mm.Missing, TensorRef{File: s.file, Name: name, Shape: slices.Clone(want), Param: p.Name})
		return
	}
	if s.used == nil {
		s.used = map[string]bool{}
	}
	s.used[name] = true
	if !slices.Equal(t.Shape, want) {
		mm.WrongShape = append(mm.WrongShape, ShapeMismatch{File: s.file, Name: name, Param: p.Name, Have: t.Shape, Want: slices.Clone(want)})
		return
	}
	copy(p.Value.Data().([]float32), t.Data)
}

// leftovers records the tensors no parameter asked for.
func (s *tensorSet) leftovers(mm *MismatchError) {
	for _, n := range s.order {
		if !s.used[n] {
			mm.Unexpected = append(mm.Unexpected, TensorRef{File: s.file, Name: n, Shape: s.byName[n].Shape})
		}
	}
}

// TensorRef names one tensor of a file and, where one asked for it, the model parameter.
type TensorRef struct {
	File  string
	Name  string // the tensor's name in File
	Shape []int
	Param string // the model parameter, "" for an unexpected tensor
}

// ShapeMismatch is a tensor whose shape differs from its parameter's.
type ShapeMismatch struct {
	File  string
	Name  string // the tensor's name in File
	Param string // the model parameter
	Have  []int  // the tensor's shape
	Want  []int  // the parameter's shape
}

// MismatchError lists every way the tensors of a directory fail to fit a model.
type MismatchError struct {
	Dir        string
	Missing    []TensorRef // parameters with no tensor
	Unexpected []TensorRef // tensors with no parameter
	WrongShape []ShapeMismatch
}

func (e *MismatchError) err(dir string) error {
	if len(e.Missing)+len(e.Unexpected)+len(e.WrongShape) == 0 {
		return nil
	}
	e.Dir = dir
	return e
}

// Error lists the first maxListed tensors of each kind and counts the rest.
func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s does not fit the model: %d missing, %d unexpected, %d wrongly shaped tensors",
		e.Dir, len(e.Missing), len(e.Unexpected), len(e.WrongShape))
	more := func(n int) {
		if n > maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", n-maxListed)
		}
	}
	for _, t := range e.Missing[:min(len(e.Missing), maxListed)] {
		fmt.Fprintf(&b, "\n  missing: %s %v for parameter %s, not in %s", t.Name, t.Shape, t.Param, t.File)
	}
	more(len(e.Missing))
	for _, t := range e.Unexpected[:min(len(e.Unexpected), maxListed)] {
		fmt.Fprintf(&b, "\n  unexpected: %s %v in %s", t.Name, t.Shape, t.File)
	}
	more(len(e.Unexpected))
	for _, t := range e.WrongShape[:min(len(e.WrongShape), maxListed)] {
		fmt.Fprintf(&b, "\n  wrong shape: %s in %s is %v, parameter %s is %v", t.Name, t.File, t.Have, t.Param, t.Want)
	}
	more(len(e.WrongShape))
	return b.String()
}

// stMaxLength is sentence-transformers' maximum length when sentence_bert_config.json gives
// none: tokenizer_config.json's model_max_length (transformers' default when absent: no limit),
// capped at max_position_embeddings maxPos. A model_max_length below 1 is an error naming the
// file, field and value.
func stMaxLength(dir string, maxPos int) (int, error) {
	path := filepath.Join(dir, TokenizerConfigFile)
	if !exists(path) {
		return maxPos, nil
	}
	var c struct {
		ModelMaxLength *float64 `json:"model_max_length"` // often 1e30 (VERY_LARGE_INTEGER)
	}
	if err := readJSON(path, &c, false); err != nil {
		return 0, err
	}
	if c.ModelMaxLength == nil {
		return maxPos, nil
	}
	if *c.ModelMaxLength < 1 {
		return 0, fmt.Errorf("%s: model_max_length = %v, want a length >= 1", path, *c.ModelMaxLength)
	}
	if *c.ModelMaxLength >= float64(maxPos) {
		return maxPos, nil
	}
	return int(*c.ModelMaxLength), nil
}

// readMaxLength reads max_seq_length from sentence_bert_config.json (0 when the file or the
// field is absent or null); a value below 1 is an error naming the file, field and value.
func readMaxLength(dir string) (int, error) {
	path := filepath.Join(dir, SentenceBertFile)
	if !exists(path) {
		return 0, nil
	}
	var c struct {
		MaxSeqLength *int `json:"max_seq_length"`
	}
	if err := readJSON(path, &c, false); err != nil {
		return 0, err
	}
	if c.MaxSeqLength == nil {
		return 0, nil
	}
	if *c.MaxSeqLength < 1 {
		return 0, fmt.Errorf("%s: max_seq_length = %d, want a length >= 1", path, *c.MaxSeqLength)
	}
	return *c.MaxSeqLength, nil
}

// checkSimilarity accepts the similarities a bi-encoder of this toolkit computes ("" for a file
// that does not say).
func checkSimilarity(path, field, v string) error {
	switch v {
	case "", "cosine", "dot":
		return nil
	}
	return fmt.Errorf("%s: %s = %q; this toolkit scores by \"cosine\" or \"dot\"", path, field, v)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func fileIfExists(path string) string {
	if exists(path) {
		return path
	}
	return ""
}
