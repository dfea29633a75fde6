package atlas

import (
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
)

// section is the [atlas] table of the recipe, which this kind owns (configs.Section): Load
// decodes it with Config's defaults and checks it with check.
var section = configs.NewSection("atlas", defaultConfig, check)

// Of returns the [atlas] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "atlas") }

// Config is the [atlas] section of kind = "atlas": Atlas' four ways a retriever learns from the
// reader without passage labels (Izacard et al. 2022, section 2.2), each trained from the same
// start with the query tower alone and with both towers (the index refreshed by
// [index_refresh]), the frozen fine-tuned reader the teacher.
type Config struct {
	// Systems are the retrievers trained and compared, each from the same start: "supervised"
	// (InfoNCE on the gold entries, the ceiling, with train.steps, train.batch_size, train.lr)
	// and "<objective>_<towers>", objective one of "attention" (attention distillation),
	// "emdr2", "perplexity" (perplexity distillation), "loo" (leave-one-out perplexity
	// distillation), towers "query" or "both". Default every objective with both tower settings,
	// after "supervised".
	Systems []string `toml:"systems"`
	// Steps is the training steps per system; >= 0. Default 200.
	Steps int `toml:"steps"`
	// BatchSize is the training questions per step; >= 1. Default 16.
	BatchSize int `toml:"batch_size"`
	// TopK is K, the candidates per question the reader scores; >= 2. Default 8.
	TopK int `toml:"top_k"`
	// BM25Depth: candidates are BM25's top bm25_depth rescored by the dense retriever (with both
	// towers, by the serving index's vectors); >= top_k. Default 20.
	BM25Depth int `toml:"bm25_depth"`
	// LR is the peak AdamW learning rate; > 0. Default 0.0005.
	LR float64 `toml:"lr"`
	// PassageLRScale multiplies lr for the passage tower of the "_both" systems; > 0. Default 1.
	PassageLRScale float64 `toml:"passage_lr_scale"`
	// TauAttention is the temperature of the attention teacher softmax(alpha / tau); > 0.
	// Default 0.05.
	TauAttention float64 `toml:"tau_attention"`
	// TauLM is the temperature of the perplexity teacher softmax(log p(y|z,x) / tau); > 0.
	// Default 1.
	TauLM float64 `toml:"tau_lm"`
	// TauLOO is the temperature of the leave-one-out teacher softmax(o / tau); > 0. Default 1.
	TauLOO float64 `toml:"tau_loo"`
	// ScoreBatch is the reader rows per teacher forward pass; >= 1. Default 64.
	ScoreBatch int `toml:"score_batch"`
}

var (
	atlasObjectives = []string{"attention", "emdr2", "perplexity", "loo"}
	atlasTowers     = []string{"query", "both"}
)

func defaultConfig() Config {
	systems := []string{"supervised"}
	for _, o := range atlasObjectives {
		for _, t := range atlasTowers {
			systems = append(systems, o+"_"+t)
		}
	}
	return Config{Systems: systems, Steps: 200, BatchSize: 16, TopK: 8, BM25Depth: 20, LR: 5e-4, PassageLRScale: 1,
		TauAttention: 0.05, TauLM: 1, TauLOO: 1, ScoreBatch: 64}
}

// System splits an [atlas] system name into its objective and towers ("", "" for
// "supervised"); ok is false for a name that is neither.
func System(name string) (objective, towers string, ok bool) {
	if name == "supervised" {
		return "", "", true
	}
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return "", "", false
	}
	objective, towers = name[:i], name[i+1:]
	return objective, towers, slices.Contains(atlasObjectives, objective) && slices.Contains(atlasTowers, towers)
}

// check validates [atlas] within the recipe r.
func check(v *configs.Checker, r *configs.Recipe, a *Config) {
	if len(a.Systems) == 0 {
		v.Fail("atlas.systems", `must name at least one system ("supervised" or "<objective>_<towers>")`)
	}
	v.Distinct("atlas.systems", a.Systems)
	for _, s := range a.Systems {
		if _, _, ok := System(s); !ok {
			v.Fail("atlas.systems", `unknown system %q: want "supervised" or "<objective>_<towers>", objective one of %s, towers one of %s`,
				s, configs.QuoteList(atlasObjectives), configs.QuoteList(atlasTowers))
		}
	}
	configs.AtLeast(v, "atlas.steps", a.Steps, 0)
	configs.AtLeast(v, "atlas.batch_size", a.BatchSize, 1)
	configs.AtLeast(v, "atlas.top_k", a.TopK, 2)
	configs.AtLeast(v, "atlas.bm25_depth", a.BM25Depth, a.TopK)
	v.Positive("atlas.lr", a.LR)
	v.Positive("atlas.passage_lr_scale", a.PassageLRScale)
	v.Positive("atlas.tau_attention", a.TauAttention)
	v.Positive("atlas.tau_lm", a.TauLM)
	v.Positive("atlas.tau_loo", a.TauLOO)
	configs.AtLeast(v, "atlas.score_batch", a.ScoreBatch, 1)
	if r.Model.SharedTowers {
		v.Fail(v.SetOf("atlas.systems", "model.shared_towers"), `kind "atlas" trains the query tower alone in its "_query" systems; set model.shared_towers = false`)
	}
}
