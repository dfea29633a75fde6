package configs

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Allowed values of the enumerated keys (documented in doc.go).
var (
	encoders           = []string{"bow", "transformer"}
	poolings           = []string{"mean", "cls"}
	similarities       = []string{"dot", "cosine"}
	negativeSources    = []string{"bm25", "dense", "bm25+dense", "dense_refresh"}
	negativeStrategies = []string{"top", "random"}
	falseNegatives     = []string{"mask", "defer"}
	schedules          = []string{"linear", "cosine", "constant"}
	systemNames        = []string{"bm25", "dense", "rrf", "rerank", "zeroshot", "finetuned"}
	metricNames        = []string{"nDCG", "MRR", "Recall", "P", "MAP"}
)

// metricRE matches a metric name: a base name, optionally "@k".
var metricRE = regexp.MustCompile(`^([A-Za-z]+)(?:@([0-9]+))?$`)

// validate checks every value of a decoded, resolved recipe; the first
// impossible value is the error.
func (l *loader) validate(r *Recipe) error {
	v := &Checker{l: l}
	AtLeast(v, "seed", r.Seed, 0)

	t := r.Tokenizer
	if t.Train {
		AtLeast(v, "tokenizer.vocab_size", t.VocabSize, 100)
		AtLeast(v, "tokenizer.min_frequency", t.MinFrequency, 1)
	}
	AtLeast(v, "tokenizer.max_length", t.MaxLength, 4)
	if q := t.QueryMaxLength; q != 0 && (q < 4 || q > t.MaxLength) {
		v.Fail(v.SetOf("tokenizer.query_max_length", "tokenizer.max_length"), "must be 0 (max_length) or in [4, tokenizer.max_length = %d], got %d", t.MaxLength, q)
	}

	validateBounds(v, r)

	m := r.Model
	v.OneOf("model.encoder", m.Encoder, encoders)
	AtLeast(v, "model.hidden", m.Hidden, 1)
	v.OneOf("model.pooling", m.Pooling, poolings)
	AtLeast(v, "model.layers", m.Layers, 1)
	AtLeast(v, "model.heads", m.Heads, 1)
	AtLeast(v, "model.ffn", m.FFN, 1)
	v.InRange("model.dropout", m.Dropout, 0, 1, false)
	AtLeast(v, "model.max_position", m.MaxPosition, 1)
	if m.Encoder == "transformer" {
		if m.Heads > 0 && m.Hidden%m.Heads != 0 {
			v.Fail(v.SetOf("model.heads", "model.hidden"), "model.hidden = %d is not a multiple of model.heads = %d", m.Hidden, m.Heads)
		}
		if m.MaxPosition < t.MaxLength {
			v.Fail(v.SetOf("model.max_position", "tokenizer.max_length"), "model.max_position = %d is below tokenizer.max_length = %d", m.MaxPosition, t.MaxLength)
		}
	}

	if readsSection(r.Kind, "loss") {
		v.kindLoss("loss.name", r.Kind, r.Loss.Name)
	}
	v.OneOf("loss.similarity", r.Loss.Similarity, similarities)
	v.Positive("loss.temperature", r.Loss.Temperature)
	validateLossNeeds(v, r)

	s := r.Sampler
	AtLeast(v, "sampler.hard_negatives", s.HardNegatives, 0)
	v.OneOf("sampler.negative_source", s.NegativeSource, negativeSources)
	if w := s.NegativeWindow; w[0] < 1 || w[1] < w[0] {
		v.Fail("sampler.negative_window", "must be [first, last] with 1 <= first <= last, got [%d, %d]", w[0], w[1])
	}
	if w := s.NegativeWindow; w[0] >= 1 && w[1] >= w[0] && s.HardNegatives > w[1]-w[0]+1 {
		v.Fail(v.SetOf("sampler.hard_negatives", "sampler.negative_window"),
			"sampler.hard_negatives = %d exceeds the %d ranks of sampler.negative_window = [%d, %d] (most negatives would be drawn at random); lower hard_negatives or widen the window",
			s.HardNegatives, w[1]-w[0]+1, w[0], w[1])
	}
	v.OneOf("sampler.negative_strategy", s.NegativeStrategy, negativeStrategies)
	if s.NegativeSource == "dense_refresh" {
		if s.RefreshEvery < 1 {
			v.Fail(v.SetOf("sampler.refresh_every", "sampler.negative_source"), "sampler.negative_source = \"dense_refresh\" needs sampler.refresh_every >= 1, got %d", s.RefreshEvery)
		}
		if !readsKey(r.Kind, DenseRefreshKey) {
			v.Fail("sampler.negative_source", "\"dense_refresh\" re-mines a bi-encoder's negatives while it trains: kind %q does not", r.Kind)
		}
	} else if s.RefreshEvery != 0 {
		v.Fail(v.SetOf("sampler.refresh_every", "sampler.negative_source"), "re-mining needs sampler.negative_source = \"dense_refresh\", got %q (0 = unset)", s.NegativeSource)
	}
	v.NonNegative("sampler.negative_margin", s.NegativeMargin)
	v.InRange("sampler.negative_relative", s.NegativeRelative, 0, 1, true)
	if (s.NegativeMargin > 0 || s.NegativeRelative > 0) && s.NegativeSource != "dense_refresh" {
		key := v.SetOf("sampler.negative_margin", "sampler.negative_relative")
		v.Fail(key, "the false-negative filters compare dense scores: they need sampler.negative_source = \"dense_refresh\", got %q", s.NegativeSource)
	}
	v.OneOf("sampler.false_negatives", s.FalseNegatives, falseNegatives)

	p := r.Pretrain
	AtLeast(v, "pretrain.steps", p.Steps, 0)
	AtLeast(v, "pretrain.batch_size", p.BatchSize, 2)
	AtLeast(v, "pretrain.crop_min", p.CropMin, 1)
	if p.CropMax < p.CropMin {
		v.Fail(v.SetOf("pretrain.crop_max", "pretrain.crop_min"), "pretrain.crop_max = %d is below pretrain.crop_min = %d", p.CropMax, p.CropMin)
	}

	tr := r.Train
	AtLeast(v, "train.steps", tr.Steps, 0)
	AtLeast(v, "train.batch_size", tr.BatchSize, 2)
	AtLeast(v, "train.mini_batch_size", tr.MiniBatchSize, 0)
	if mb := tr.MiniBatchSize; mb > 0 {
		if !readsKey(r.Kind, "train.mini_batch_size") {
			v.Fail("train.mini_batch_size", "gradient caching trains a bi-encoder: kind %q does not read it (0 = off)", r.Kind)
		} else if tr.BatchSize >= 2 && (mb > tr.BatchSize || tr.BatchSize%mb != 0) {
			v.Fail(v.SetOf("train.mini_batch_size", "train.batch_size"), "train.mini_batch_size = %d does not divide train.batch_size = %d", mb, tr.BatchSize)
		}
	}
	if tr.DynamicPadding && !readsKey(r.Kind, "train.dynamic_padding") {
		v.Fail("train.dynamic_padding", "length-bucketed training graphs train a bi-encoder: kind %q does not read it (false = off)", r.Kind)
	}
	v.Positive("train.lr", tr.LR)
	v.NonNegative("train.weight_decay", tr.WeightDecay)
	AtLeast(v, "train.warmup_steps", tr.WarmupSteps, 0)
	v.OneOf("train.schedule", tr.Schedule, schedules)
	v.OneOf("train.precision", tr.Precision, []string{"float32", "bf16"})
	v.NonNegative("train.grad_clip", tr.GradClip)
	AtLeast(v, "train.log_every", tr.LogEvery, 1)
	AtLeast(v, "train.checkpoint_every", tr.CheckpointEvery, 0)
	AtLeast(v, "train.eval_every", tr.EvalEvery, 0)
	AtLeast(v, "train.patience", tr.Patience, 0)
	AtLeast(v, "eval.dev_corpus_sample", r.Eval.DevCorpusSample, 0)
	for _, k := range []struct {
		key string
		on  bool
	}{{"train.eval_every", tr.EvalEvery > 0}, {"train.patience", tr.Patience > 0}, {"eval.dev_corpus_sample", r.Eval.DevCorpusSample > 0}} {
		if k.on && !readsKey(r.Kind, k.key) {
			v.Fail(k.key, "evaluation during training chooses a bi-encoder's checkpoint: kind %q does not read it (0 = off)", r.Kind)
		} else if k.on && r.Eval.SelectMetric == "" {
			v.Fail(v.SetOf(k.key, "eval.select_metric"), "%s needs eval.select_metric (the dev metric evaluated, e.g. \"nDCG@10\")", k.key)
		}
	}
	if tr.Patience > 0 && tr.EvalEvery == 0 {
		v.Fail(v.SetOf("train.patience", "train.eval_every"), "train.patience counts dev evaluations: it needs train.eval_every >= 1")
	}
	if tr.EvalEvery > tr.Steps && tr.Steps > 0 {
		v.Fail(v.SetOf("train.eval_every", "train.steps"), "train.eval_every = %d exceeds train.steps = %d (the last step is evaluated anyway; 0 = off)", tr.EvalEvery, tr.Steps)
	}

	v.NonNegative("index.k1", r.Index.K1)
	v.InRange("index.b", r.Index.B, 0, 1, true)
	AtLeast(v, "index.stream_above", r.Index.StreamAbove, 0)
	if r.Index.StreamAbove > 0 && !readsKey(r.Kind, "index.stream_above") {
		v.Fail("index.stream_above", "streams the corpus of a retriever recipe: kind %q does not read it (0 = off)", r.Kind)
	}
	AtLeast(v, "index.ann_threshold", r.Index.ANNThreshold, 0)
	if r.Index.ANNThreshold > 0 && !readsKey(r.Kind, "index.ann_threshold") {
		v.Fail("index.ann_threshold", "searches a retriever recipe's corpus with HNSW: kind %q does not read it (0 = exact search)", r.Kind)
	}
	if r.Index.ANNM < 2 || r.Index.ANNM > 127 {
		v.Fail("index.ann_m", "HNSW's M = %d, want 2..127", r.Index.ANNM)
	}
	AtLeast(v, "index.ann_ef_construction", r.Index.ANNEfConstruction, 1)
	AtLeast(v, "index.ann_ef_search", r.Index.ANNEfSearch, 1)

	e := r.Eval
	v.Distinct("eval.splits", e.Splits)
	v.DistinctOf("eval.systems", e.Systems, systemNames)
	AtLeast(v, "eval.rrf_k", e.RRFK, 1)
	AtLeast(v, "eval.depth", e.Depth, 1)
	v.Distinct("eval.metrics", e.Metrics)
	for _, name := range e.Metrics {
		_, k, err := ParseMetric(name)
		if err != nil {
			v.Fail("eval.metrics", "%v", err)
		} else if k > e.Depth {
			v.Fail(v.SetOf("eval.metrics", "eval.depth"), "metric %q needs %d hits but eval.depth = %d", name, k, e.Depth)
		}
	}

	if e.SelectMetric != "" {
		if !slices.Contains(e.Metrics, e.SelectMetric) {
			v.Fail(v.SetOf("eval.select_metric", "eval.metrics"), "%q is not one of eval.metrics %v", e.SelectMetric, e.Metrics)
		}
		if r.Data.DevSplit == "" {
			v.Fail(v.SetOf("eval.select_metric", "data.dev_split"), "choosing a checkpoint needs data.dev_split")
		}
	}

	validateRAG(v, r)
	validateRealm(v, r)
	if v.err != nil {
		return v.err
	}
	if spec, ok := LookupKind(r.Kind); ok {
		for _, s := range spec.Own {
			if s.Check != nil {
				s.Check(v, r, r.sections[s.Name])
			}
		}
		if spec.Check != nil {
			spec.Check(v, r)
		}
	}
	return v.err
}

// DenseRefreshKey is the KindSpec.Keys entry of sampler.negative_source = "dense_refresh"
// (re-mining with the model being trained), a value only some kinds read.
const DenseRefreshKey = `sampler.negative_source = "dense_refresh"`

// ParseMetric splits a metric name such as "nDCG@10" into its base name and
// cutoff (0 when none, as in "MAP"). The base must be one of metricNames.
func ParseMetric(name string) (base string, k int, err error) {
	m := metricRE.FindStringSubmatch(name)
	if m == nil || !slices.Contains(metricNames, m[1]) {
		return "", 0, fmt.Errorf("unknown metric %q, want one of %s, optionally with @k", name, quoteList(metricNames))
	}
	if m[2] != "" {
		k, err = strconv.Atoi(m[2])
		if err != nil || k < 1 {
			return "", 0, fmt.Errorf("metric %q: cutoff must be an integer >= 1", name)
		}
	}
	return m[1], k, nil
}

// Checker records the first failed check.
type Checker struct {
	l   *loader
	err error
}

func (v *Checker) Fail(key, format string, args ...any) {
	if v.err == nil {
		v.err = v.l.errf(key, format, args...)
	}
}

// IsSet reports whether the recipe file sets key (a default does not count).
func (v *Checker) IsSet(key string) bool { return v.l.isSet(key) }

// Resolved reports whether the file is a recipe.resolved.toml, which writes every default out.
func (v *Checker) Resolved() bool { return v.l.resolved }

// SetOf returns the first of keys that the file sets, so that a conflict
// between two keys is reported at the line the user wrote; else keys[0].
func (v *Checker) SetOf(keys ...string) string {
	for _, k := range keys {
		if v.l.isSet(k) {
			return k
		}
	}
	return keys[0]
}

// OneOf fails key unless val is one of allowed.
func (v *Checker) OneOf(key, val string, allowed []string) {
	if !slices.Contains(allowed, val) {
		v.Fail(key, "unknown value %q, want one of %s", val, quoteList(allowed))
	}
}

// AtLeast fails key when val < lo.
func AtLeast[T int | int64](v *Checker, key string, val, lo T) {
	if val < lo {
		v.Fail(key, "must be >= %d, got %d", lo, val)
	}
}

// Finite reports whether x is a usable number and fails key otherwise.
func (v *Checker) Finite(key string, x float64) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		v.Fail(key, "must be a finite number, got %v", x)
		return false
	}
	return true
}

// Positive fails key unless x is finite and > 0.
func (v *Checker) Positive(key string, x float64) {
	if v.Finite(key, x) && x <= 0 {
		v.Fail(key, "must be > 0, got %v", x)
	}
}

// NonNegative fails key unless x is finite and >= 0.
func (v *Checker) NonNegative(key string, x float64) {
	if v.Finite(key, x) && x < 0 {
		v.Fail(key, "must be >= 0, got %v", x)
	}
}

// InRange checks lo <= x < hi, or lo <= x <= hi when closed.
func (v *Checker) InRange(key string, x, lo, hi float64, closed bool) {
	if !v.Finite(key, x) {
		return
	}
	if x < lo || x > hi || (!closed && x == hi) {
		bracket := ")"
		if closed {
			bracket = "]"
		}
		v.Fail(key, "must be in [%v, %v%s, got %v", lo, hi, bracket, x)
	}
}

// Distinct fails when list names an element twice.
func (v *Checker) Distinct(key string, list []string) {
	for i, s := range list {
		if slices.Contains(list[:i], s) {
			v.Fail(key, "%q listed twice", s)
			return
		}
	}
}

// DistinctOf fails when list names an element twice (Distinct) or one not in allowed (OneOf).
func (v *Checker) DistinctOf(key string, list, allowed []string) {
	v.Distinct(key, list)
	for _, s := range list {
		v.OneOf(key, s, allowed)
	}
}

// Abs resolves a path of the recipe against the recipe file's directory (absolute paths are
// cleaned), as Load resolves the shared sections' paths.
func (v *Checker) Abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(v.l.dir, p)
}

// QuoteList formats allowed values as "a", "b" or "c".
func QuoteList(list []string) string { return quoteList(list) }

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Losses whose [loss] keys the schema checks beyond loss.name (doc.go).
const (
	matryoshkaLoss = "matryoshka_infonce"
	marginMSELoss  = "margin_mse"
	klDistillLoss  = "kl_distill"
	// the colbert and splade kinds' distillation losses
	colbertKLDistillLoss = "colbert_kl_distill"
	spladeMarginMSELoss  = "splade_margin_mse"
	spladeKLDistillLoss  = "splade_kl_distill"
)

// distillationLosses learn from a teacher's scores (loss.teacher).
var distillationLosses = []string{marginMSELoss, klDistillLoss, colbertKLDistillLoss, spladeMarginMSELoss, spladeKLDistillLoss}

// IsDistillation reports whether loss learns from a teacher's scores (loss.teacher).
func IsDistillation(loss string) bool { return slices.Contains(distillationLosses, loss) }

// validateLossNeeds checks what loss.name needs and the [loss] keys only some losses read:
// loss.dims and loss.dim_weights (matryoshka_infonce), loss.teacher, loss.teacher_cache and the
// negatives a distillation loss compares (margin_mse: exactly one per query; kl_distill: at
// least one).
func validateLossNeeds(v *Checker, r *Recipe) {
	l := r.Loss
	v.Positive("loss.teacher_temperature", l.TeacherTemperature)
	if v.Finite("loss.infonce_weight", l.InfoNCEWeight) && l.InfoNCEWeight < 0 {
		v.Fail("loss.infonce_weight", "= %v, want >= 0", l.InfoNCEWeight)
	}
	if v.Finite("loss.teacher_bm25_weight", l.TeacherBM25Weight) && l.TeacherBM25Weight < 0 {
		v.Fail("loss.teacher_bm25_weight", "= %v, want >= 0", l.TeacherBM25Weight)
	}
	if l.Name == matryoshkaLoss {
		if len(l.Dims) == 0 {
			v.Fail(v.SetOf("loss.dims", "loss.name"), "%s needs loss.dims, the embedding prefixes it trains, full dimension first (e.g. [384, 256, 128, 64])", l.Name)
		}
		for i, d := range l.Dims {
			if d < 1 {
				v.Fail("loss.dims", "dims[%d] = %d, want >= 1", i, d)
			} else if i > 0 && d >= l.Dims[i-1] {
				v.Fail("loss.dims", "must be strictly descending (the full dimension first), got %v", l.Dims)
			}
		}
		if len(l.Dims) > 0 && r.Model.InitFrom == "" && l.Dims[0] > r.Model.Hidden {
			v.Fail(v.SetOf("loss.dims", "model.hidden"), "dims[0] = %d exceeds the model's output dimension model.hidden = %d", l.Dims[0], r.Model.Hidden)
		}
		if len(l.DimWeights) > 0 && len(l.DimWeights) != len(l.Dims) {
			v.Fail("loss.dim_weights", "%d weights for the %d loss.dims %v (one per dim, or none for all 1)", len(l.DimWeights), len(l.Dims), l.Dims)
		}
		for i, w := range l.DimWeights {
			if v.Finite("loss.dim_weights", w) && w <= 0 {
				v.Fail("loss.dim_weights", "dim_weights[%d] = %v, want > 0", i, w)
			}
		}
	} else {
		// (a resolved recipe writes every key: only values away from the defaults are refused)
		if len(l.Dims) > 0 {
			v.Fail("loss.dims", "is read only by loss.name = %q (loss.name is %q)", matryoshkaLoss, l.Name)
		}
		if len(l.DimWeights) > 0 {
			v.Fail("loss.dim_weights", "is read only by loss.name = %q (loss.name is %q)", matryoshkaLoss, l.Name)
		}
	}
	if !IsDistillation(l.Name) {
		def := Defaults().Loss
		for _, k := range []struct {
			key string
			set bool
		}{{"loss.teacher", l.Teacher != ""}, {"loss.teacher_cache", l.TeacherCache != ""}, {"loss.teacher_temperature", l.TeacherTemperature != def.TeacherTemperature}, {"loss.infonce_weight", l.InfoNCEWeight != def.InfoNCEWeight}, {"loss.teacher_bm25_weight", l.TeacherBM25Weight != def.TeacherBM25Weight}} {
			if k.set {
				v.Fail(k.key, "is read only by the distillation losses %s (loss.name is %q)", quoteList(distillationLosses), l.Name)
			}
		}
		return
	}
	if l.Teacher == "" {
		v.Fail(v.SetOf("loss.teacher", "loss.name"), "%s distils a cross-encoder teacher: set loss.teacher to a reranker's model directory (<run>/reranker-<loss>) or an exported cross-encoder", l.Name)
	}
	switch n := r.Sampler.HardNegatives; {
	case (l.Name == marginMSELoss || l.Name == spladeMarginMSELoss) && n != 1:
		v.Fail("loss.name", "%s compares each query's positive with one hard negative: it needs sampler.hard_negatives = 1, got %d", l.Name, n)
	case n < 1:
		v.Fail("loss.name", "%s matches the teacher's distribution over each query's positive and hard negatives: it needs sampler.hard_negatives >= 1, got %d", l.Name, n)
	}
	if l.Name == colbertKLDistillLoss && l.InfoNCEWeight != 0 {
		v.Fail("loss.infonce_weight", "%s has no InfoNCE term (kind colbert trains colbert_kl_distill alone); drop the key", l.Name)
	}
}

// File makes the path *p of key (a kind's own section's input file) absolute against the
// recipe's directory, as Load does for the shared sections' paths, and checks that it names a
// file; an empty path is left to the kind's own check.
func (v *Checker) File(key string, p *string) {
	if *p == "" {
		return
	}
	if !filepath.IsAbs(*p) {
		*p = filepath.Join(v.l.dir, *p)
	}
	*p = filepath.Clean(*p)
	if err := isFile(*p); err != nil {
		v.Fail(key, "%v", err)
	}
}
