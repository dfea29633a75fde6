package knnlmlm

import (
	"slices"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/knnlm"
)

// section is the [knnlm_lm] table, owned by this kind.
var section = configs.NewSection("knnlm_lm", defaultConfig, check)

// Of returns the [knnlm_lm] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "knnlm_lm") }

// Bounds on the sizes a recipe sets, checked before anything is allocated.
const (
	maxK              = 4096    // neighbours searched per token
	maxAbstractTokens = 8192    // LM tokens of an abstract (also bounded by the LM's context)
	maxShardDocs      = 4096    // abstracts per datastore shard
	maxGrid           = 64      // values of a grid (temperatures, lambdas)
	maxHNSWM          = 127     // HNSW links per node
	maxEf             = 1 << 16 // HNSW candidate lists
)

// Config is the [knnlm_lm] section: the frozen LM, which abstracts go where, the datastore
// and the kNN-LM's k, temperature and λ grids (Khandelwal et al. 2020, eq. 2-3).
type Config struct {
	// LM is the frozen language model, a LLaMA GGUF with its tokenizer (SmolLM2-135M-Instruct),
	// relative to the recipe's directory; required.
	LM string `toml:"lm"`
	// K is k, the neighbours searched per held-out token; 1..4096. Default 1024 (the paper's).
	K int `toml:"k"`
	// Temperatures is the grid of T in exp(-d / T) (d the squared L2 distance), chosen on dev
	// with λ; each > 0, distinct, at most 64. Default [1] (the paper's).
	Temperatures []float64 `toml:"temperatures"`
	// Lambdas is the grid of λ in p = λ p_kNN + (1 - λ) p_LM, chosen on dev; each in [0, 1],
	// distinct, at most 64; 0 (the LM alone) is always scored too. Default [0.1, 0.25, 0.5].
	Lambdas []float64 `toml:"lambdas"`
	// Precision of the stored keys: "float32" or "float16" (half the bytes; distances use the
	// rounded keys). Default "float16".
	Precision string `toml:"precision"`
	// Search is "exact" (every key, blocked matrix products) or "hnsw" (index/ann). Default
	// "exact".
	Search string `toml:"search"`
	// HNSWM is HNSW's links per node (layer 0: twice); 2..127. Default 16.
	HNSWM int `toml:"hnsw_m"`
	// HNSWEfConstruction is HNSW's candidate list while inserting; 1..65536. Default 100.
	HNSWEfConstruction int `toml:"hnsw_ef_construction"`
	// HNSWEfSearch is HNSW's candidate list while searching (at least k is used); 1..65536.
	// Default 128.
	HNSWEfSearch int `toml:"hnsw_ef_search"`
	// AbstractTokens bounds the LM tokens of an abstract (title, "\n", text), cut at the end;
	// 2..8192 and within the LM's context. Default 512.
	AbstractTokens int `toml:"abstract_tokens"`
	// CorpusCap, when > 0, puts only the first n abstracts (corpus order) that no dev or test
	// claim cites into the datastore; 0: all of them. >= 0.
	CorpusCap int `toml:"corpus_cap"`
	// DevDocs and TestDocs, when > 0, score only the first n (corpus order) of the abstracts the
	// dev (test) claims cite; 0: all. All of them stay out of the datastore whatever n. >= 0.
	DevDocs  int `toml:"dev_docs"`
	TestDocs int `toml:"test_docs"`
	// ShardDocs is the abstracts per datastore shard (the unit a killed build resumes from);
	// 1..4096. Default 64.
	ShardDocs int `toml:"shard_docs"`
	// MaxDatastoreBytes bounds the datastore's keys, norms and values (knnlm.Store.Bytes),
	// checked from the token counts before any forward pass; >= 1. Default 4 GiB.
	MaxDatastoreBytes int64 `toml:"max_datastore_bytes"`
}

func defaultConfig() Config {
	return Config{K: 1024, Temperatures: []float64{1}, Lambdas: []float64{0.1, 0.25, 0.5}, Precision: knnlm.Float16, Search: "exact",
		HNSWM: 16, HNSWEfConstruction: 100, HNSWEfSearch: 128, AbstractTokens: 512, ShardDocs: 64, MaxDatastoreBytes: 4 << 30}
}

func check(v *configs.Checker, _ *configs.Recipe, c *Config) {
	if c.LM == "" {
		v.Fail("knnlm_lm.lm", "required: a LLaMA GGUF file (e.g. SmolLM2-135M-Instruct)")
	}
	v.File("knnlm_lm.lm", &c.LM)
	bounded := func(key string, x, lo, hi int) {
		configs.AtLeast(v, key, x, lo)
		if x > hi {
			v.Fail(key, "must be <= %d, got %d", hi, x)
		}
	}
	bounded("knnlm_lm.k", c.K, 1, maxK)
	grid := func(key string, g []float64, each func(float64)) {
		switch {
		case len(g) == 0:
			v.Fail(key, "must hold at least one value")
		case len(g) > maxGrid:
			v.Fail(key, "must hold at most %d values, got %d", maxGrid, len(g))
		}
		for i, x := range g {
			each(x)
			if slices.Contains(g[:i], x) {
				v.Fail(key, "values must be distinct (%g twice)", x)
			}
		}
	}
	grid("knnlm_lm.temperatures", c.Temperatures, func(x float64) { v.Positive("knnlm_lm.temperatures", x) })
	grid("knnlm_lm.lambdas", c.Lambdas, func(x float64) { v.InRange("knnlm_lm.lambdas", x, 0, 1, true) })
	v.OneOf("knnlm_lm.precision", c.Precision, []string{knnlm.Float32, knnlm.Float16})
	v.OneOf("knnlm_lm.search", c.Search, []string{"exact", "hnsw"})
	bounded("knnlm_lm.hnsw_m", c.HNSWM, 2, maxHNSWM)
	bounded("knnlm_lm.hnsw_ef_construction", c.HNSWEfConstruction, 1, maxEf)
	bounded("knnlm_lm.hnsw_ef_search", c.HNSWEfSearch, 1, maxEf)
	bounded("knnlm_lm.abstract_tokens", c.AbstractTokens, 2, maxAbstractTokens)
	configs.AtLeast(v, "knnlm_lm.corpus_cap", c.CorpusCap, 0)
	configs.AtLeast(v, "knnlm_lm.dev_docs", c.DevDocs, 0)
	configs.AtLeast(v, "knnlm_lm.test_docs", c.TestDocs, 0)
	bounded("knnlm_lm.shard_docs", c.ShardDocs, 1, maxShardDocs)
	configs.AtLeast(v, "knnlm_lm.max_datastore_bytes", c.MaxDatastoreBytes, 1)
}
