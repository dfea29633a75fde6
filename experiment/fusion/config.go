package fusion

import (
	"slices"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/knnlm"
)

// section is the [knnlm] table, owned by this kind.
var section = configs.NewSection("knnlm", defaultConfig, check)

// Of returns the [knnlm] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "knnlm") }

// Config is the [knnlm] section: the kNN-LM over the reader (Khandelwal et al. 2020; package
// knnlm has the equations).
type Config struct {
	// K is the neighbours retrieved per token; 1..4096. Default 32.
	K int `toml:"k"`
	// Temperature T of p_kNN ∝ exp(-d / T), d the squared L2 distance; > 0. Default 1 (the
	// paper's).
	Temperature float64 `toml:"temperature"`
	// Lambda is λ of p = λ p_kNN + (1 - λ) p_LM; -1 (the default) chooses it on dev among
	// Lambdas (perplexity on the held-out dev documents; exact match on the dev questions, per
	// system), a value in [0, 1] fixes it.
	Lambda float64 `toml:"lambda"`
	// Lambdas are the values swept on dev, each in [0, 1], distinct. Default 0, 0.05, 0.1,
	// 0.25, 0.5, 0.75, 0.9.
	Lambdas []float64 `toml:"lambdas"`
	// Precision of the keys: "float32" or "float16". Default "float32".
	Precision string `toml:"precision"`
	// Search is "exact" (every key) or "hnsw" (index/ann's graph, M = HNSWM, efConstruction =
	// HNSWEfConstruction, efSearch = HNSWEfSearch). Default "exact".
	Search             string `toml:"search"`
	HNSWM              int    `toml:"hnsw_m"`
	HNSWEfConstruction int    `toml:"hnsw_ef_construction"`
	HNSWEfSearch       int    `toml:"hnsw_ef_search"`
	// HeldOutDocs are the last pretraining documents kept out of the reader's pretraining and
	// the datastore: the first half is the dev text for perplexity, the rest the test text;
	// 2..10000. Default 400.
	HeldOutDocs int `toml:"held_out_docs"`
	// Prompts is how questions are asked: "reader" ("[CLS] <ctx> passage </ctx> question cloze",
	// the fine-tuned reader's format) or "cloze" ("[CLS] passage cloze", for a reader that is
	// only a language model: reader.finetune_steps = 0; the answer must follow the cloze, then
	// "." or [SEP]). Default "reader".
	Prompts string `toml:"prompts"`
}

func defaultConfig() Config {
	return Config{K: 32, Temperature: 1, Lambda: -1, Lambdas: []float64{0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9},
		Precision: knnlm.Float32, Search: "exact", HNSWM: 16, HNSWEfConstruction: 100, HNSWEfSearch: 128, HeldOutDocs: 400, Prompts: "reader"}
}

func check(v *configs.Checker, _ *configs.Recipe, c *Config) {
	configs.AtLeast(v, "knnlm.k", c.K, 1)
	if c.K > 4096 {
		v.Fail("knnlm.k", "must be <= 4096, got %d", c.K)
	}
	v.Positive("knnlm.temperature", c.Temperature)
	if c.Lambda != -1 {
		v.InRange("knnlm.lambda", c.Lambda, 0, 1, true)
	}
	if len(c.Lambdas) == 0 {
		v.Fail("knnlm.lambdas", "must hold at least one value")
	}
	for _, l := range c.Lambdas {
		v.InRange("knnlm.lambdas", l, 0, 1, true)
	}
	s := slices.Clone(c.Lambdas)
	slices.Sort(s)
	if len(slices.Compact(s)) != len(c.Lambdas) {
		v.Fail("knnlm.lambdas", "values must be distinct")
	}
	v.OneOf("knnlm.precision", c.Precision, []string{knnlm.Float32, knnlm.Float16})
	v.OneOf("knnlm.search", c.Search, []string{"exact", "hnsw"})
	configs.AtLeast(v, "knnlm.hnsw_m", c.HNSWM, 2)
	if c.HNSWM > 127 {
		v.Fail("knnlm.hnsw_m", "must be <= 127, got %d", c.HNSWM)
	}
	configs.AtLeast(v, "knnlm.hnsw_ef_construction", c.HNSWEfConstruction, 1)
	configs.AtLeast(v, "knnlm.hnsw_ef_search", c.HNSWEfSearch, 1)
	v.OneOf("knnlm.prompts", c.Prompts, []string{"reader", "cloze"})
	configs.AtLeast(v, "knnlm.held_out_docs", c.HeldOutDocs, 2)
	if c.HeldOutDocs > 10000 {
		v.Fail("knnlm.held_out_docs", "must be <= 10000, got %d", c.HeldOutDocs)
	}
}
