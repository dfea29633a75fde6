package replug

import "github.com/ragtrain/ragtrain/configs"

// section is the [replug] table of the recipe, which this kind owns (configs.Section): Load
// decodes it with Config's defaults and checks it with check.
var section = configs.NewSection("replug", defaultConfig, check)

// Of returns the [replug] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "replug") }

// Config is the [replug] section: retriever training from a frozen reader's likelihoods
// (Shi et al. 2023, REPLUG LSR).
type Config struct {
	// Systems are the retrievers trained and compared, each from the same start:
	// "supervised" and "replug". Default ["supervised", "replug"].
	Systems []string `toml:"systems"`
	// Towers are the towers RePlug trains: "query" (the index stays exact) or "both" (the
	// index goes stale and [index_refresh] refreshes it). Default "query".
	Towers string `toml:"towers"`
	// Steps is the RePlug training steps; >= 0. Default 300.
	Steps int `toml:"steps"`
	// BatchSize is the training questions per step; >= 1. Default 16.
	BatchSize int `toml:"batch_size"`
	// TopK is K, the candidates per question the reader scores, drawn as rag.candidate_source
	// says ("dense" or "bm25+dense"; dense only with towers = "both"); >= 2. Default 8.
	TopK int `toml:"top_k"`
	// LR is the peak AdamW learning rate; > 0. Default 0.0005.
	LR float64 `toml:"lr"`
	// TauLM is the temperature of the reader's preference softmax(log p(y|z,x) / tau_lm);
	// > 0 (a larger one softens a weak reader's noisy preferences, but a flat target pulls
	// the retriever towards uniform over its candidates). Default 1.
	TauLM float64 `toml:"tau_lm"`
	// ScoreBatch is the reader rows scored per forward pass; >= 1. Default 64.
	ScoreBatch int `toml:"score_batch"`
}

var (
	replugSystems = []string{"supervised", "replug"}
	replugTowers  = []string{"query", "both"}
)

func defaultConfig() Config {
	return Config{Systems: []string{"supervised", "replug"}, Towers: "query", Steps: 300, BatchSize: 16, TopK: 8,
		LR: 5e-4, TauLM: 1, ScoreBatch: 64}
}

// check validates [replug] within the recipe r.
func check(v *configs.Checker, r *configs.Recipe, p *Config) {
	if len(p.Systems) == 0 {
		v.Fail("replug.systems", "must name at least one of %s", configs.QuoteList(replugSystems))
	}
	v.DistinctOf("replug.systems", p.Systems, replugSystems)
	v.OneOf("replug.towers", p.Towers, replugTowers)
	if p.Towers == "both" && r.RAG.CandidateSource != "dense" {
		v.Fail(v.SetOf("replug.towers", "rag.candidate_source"), `replug.towers = "both" retrieves from the refreshed dense index; set rag.candidate_source = "dense"`)
	}
	configs.AtLeast(v, "replug.steps", p.Steps, 0)
	configs.AtLeast(v, "replug.batch_size", p.BatchSize, 1)
	configs.AtLeast(v, "replug.top_k", p.TopK, 2)
	v.Positive("replug.lr", p.LR)
	v.Positive("replug.tau_lm", p.TauLM)
	configs.AtLeast(v, "replug.score_batch", p.ScoreBatch, 1)

}
