package splade

import (
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/export"
)

var section = configs.NewSection("splade", defaultConfig, check)

// Of returns the [splade] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "splade") }

// Config is the [splade] section: the FLOPS regulariser, the pruning at indexing and the
// evaluation corpus.
type Config struct {
	// LambdaQ and LambdaD weight FLOPS(queries) and FLOPS(passages) in the loss (SPLADE v2's
	// lambda_q 3e-4 and lambda_d 1e-4 on MS MARCO); >= 0. Defaults 3e-4 and 1e-4.
	LambdaQ float64 `toml:"lambda_q"`
	LambdaD float64 `toml:"lambda_d"`
	// FlopsWarmup is the steps over which both weights grow quadratically from 0
	// (losses.FlopsWarmup); 0: full weight from the first step. >= 0. Default 0.
	FlopsWarmup int `toml:"flops_warmup"`
	// TopKQuery and TopKPassage keep the k largest weights of each query and passage vector at
	// indexing and search (index.Prune); 0 keeps every non-zero weight. >= 0. Defaults 0 and 256.
	TopKQuery   int `toml:"top_k_query"`
	TopKPassage int `toml:"top_k_passage"`
	// DecoderBiasInit is the MLM decoder's bias before training, every term's (model.NewSplade:
	// the transform starts as the identity, so this is the threshold a token's logit must pass
	// to give a term weight; -5 keeps ~300 terms per 128-token passage of all-MiniLM-L6-v2 on
	// SciFact). Finite. Default -5.
	DecoderBiasInit float64 `toml:"decoder_bias_init"`
	// EncodeBatch is the sequences per forward pass when encoding the corpus and the queries;
	// >= 1. Default 16.
	EncodeBatch int `toml:"encode_batch"`
	// EvalCorpusSample, when > 0, evaluates every system (BM25 included) on a sample of the
	// corpus instead of all of it: every passage the eval splits' qrels judge plus this many
	// others drawn with the recipe's seed. The numbers are then not comparable with a full
	// ranking's; metrics.json records the passages ("eval/corpus_passages"). 0: the whole
	// corpus. >= 0. Default 0.
	EvalCorpusSample int `toml:"eval_corpus_sample"`
	// SelectTopKPassage, when set, chooses the passages' pruning on data.dev_split instead of
	// TopKPassage: the trained encoder's passage vectors are kept to each value's largest
	// weights in turn and the dev queries searched; the smallest value whose dev nDCG@10 is at
	// least the largest value's minus SelectTolerance indexes the corpus for every split and
	// for `train search` (select.go; runs/<dev>.splade.select.tsv, metrics.json
	// "splade/top_k_passage"). The model before training (eval.systems "zeroshot") keeps
	// TopKPassage. At most 16 values, each >= 1.
	SelectTopKPassage []int `toml:"select_top_k_passage"`
	// SelectTolerance is the dev nDCG@10 a smaller index may lose against the largest value of
	// SelectTopKPassage; in [0, 1]. Default 0.005.
	SelectTolerance float64 `toml:"select_tolerance"`
}

func defaultConfig() Config {
	return Config{LambdaQ: 3e-4, LambdaD: 1e-4, TopKPassage: 256, EncodeBatch: 16, DecoderBiasInit: -5, SelectTolerance: 0.005}
}

// maxSelectValues bounds splade.select_top_k_passage.
const maxSelectValues = 16

func check(v *configs.Checker, r *configs.Recipe, c *Config) {
	v.NonNegative("splade.lambda_q", c.LambdaQ)
	v.NonNegative("splade.lambda_d", c.LambdaD)
	configs.AtLeast(v, "splade.flops_warmup", c.FlopsWarmup, 0)
	configs.AtLeast(v, "splade.top_k_query", c.TopKQuery, 0)
	configs.AtLeast(v, "splade.top_k_passage", c.TopKPassage, 0)
	configs.AtLeast(v, "splade.encode_batch", c.EncodeBatch, 1)
	v.Finite("splade.decoder_bias_init", c.DecoderBiasInit)
	configs.AtLeast(v, "splade.eval_corpus_sample", c.EvalCorpusSample, 0)
	if n := len(c.SelectTopKPassage); n > maxSelectValues {
		v.Fail("splade.select_top_k_passage", "at most %d values, got %d", maxSelectValues, n)
	}
	for _, k := range c.SelectTopKPassage {
		configs.AtLeast(v, "splade.select_top_k_passage", k, 1)
	}
	if !(c.SelectTolerance >= 0 && c.SelectTolerance <= 1) {
		v.Fail("splade.select_tolerance", "must be in [0, 1], got %g", c.SelectTolerance)
	}
	if len(c.SelectTopKPassage) > 0 && r.Data.DevSplit == "" {
		v.Fail("splade.select_top_k_passage", "choosing the pruning on dev needs data.dev_split")
	}
}

// selecting reports whether the passages' pruning is chosen on dev.
func (c *Config) selecting() bool { return len(c.SelectTopKPassage) > 0 }

// KindName is the recipe kind and the config.json kind of a SPLADE checkpoint.
const KindName = export.KindSplade
