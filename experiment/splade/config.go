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
}

func defaultConfig() Config {
	return Config{LambdaQ: 3e-4, LambdaD: 1e-4, TopKPassage: 256, EncodeBatch: 16, DecoderBiasInit: -5}
}

func check(v *configs.Checker, _ *configs.Recipe, c *Config) {
	v.NonNegative("splade.lambda_q", c.LambdaQ)
	v.NonNegative("splade.lambda_d", c.LambdaD)
	configs.AtLeast(v, "splade.flops_warmup", c.FlopsWarmup, 0)
	configs.AtLeast(v, "splade.top_k_query", c.TopKQuery, 0)
	configs.AtLeast(v, "splade.top_k_passage", c.TopKPassage, 0)
	configs.AtLeast(v, "splade.encode_batch", c.EncodeBatch, 1)
	v.Finite("splade.decoder_bias_init", c.DecoderBiasInit)
	configs.AtLeast(v, "splade.eval_corpus_sample", c.EvalCorpusSample, 0)
}

// KindName is the recipe kind and the config.json kind of a SPLADE checkpoint.
const KindName = export.KindSplade
