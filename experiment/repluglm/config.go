package repluglm

import (
	"github.com/ragtrain/ragtrain/configs"
)

// section is the [replug_lm] table, owned by this kind.
var section = configs.NewSection("replug_lm", defaultConfig, check)

// Of returns the [replug_lm] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "replug_lm") }

// Bounds on the sizes a recipe sets, checked before anything is allocated.
const (
	maxTopK           = 64   // candidates per claim
	maxAbstractTokens = 2048 // LM tokens of an abstract
	maxClaimTokens    = 256  // LM tokens of a claim (longer ones are cut, and counted)
)

// Config is the [replug_lm] section: the frozen LM, how it reads a (claim, abstract) pair, the
// candidates and the two temperatures of RePlug LSR (Shi et al. 2023, eq. 2-4).
type Config struct {
	// LM is the frozen language model, a LLaMA GGUF with its tokenizer (SmolLM2-135M-Instruct),
	// relative to the recipe's directory; required.
	LM string `toml:"lm"`
	// TopK is k, the abstracts per training claim the retriever and the LM score (the frozen
	// zero-shot retriever's top k); 2..64. Default 8.
	TopK int `toml:"top_k"`
	// TauR is gamma of eq. 2: P_R(d|x) = softmax(cos(q, d) / gamma) over the top k; > 0.
	// Default 0.05 (all-MiniLM-L6-v2's scale 20).
	TauR float64 `toml:"tau_r"`
	// TauLM is beta of eq. 3: Q_LM(d|x,y) = softmax(log P_LM(y | d, x) / beta); > 0. Default 1.
	TauLM float64 `toml:"tau_lm"`
	// AbstractTokens bounds the LM tokens of an abstract (title, then text, cut at the end);
	// 16..2048 and, with the instruction and the claim, within the LM's context. Default 224.
	AbstractTokens int `toml:"abstract_tokens"`
	// ClaimTokens bounds the LM tokens of a claim (y); 4..256. Default 96 (SciFact's longest
	// train claim is under 96 SmolLM2 tokens; a cut claim is counted and reported).
	ClaimTokens int `toml:"claim_tokens"`
	// Instruction is x, the text between the abstract and the claim ("\n" + Instruction + " "
	// before the claim); "" puts only the newline. Default "Claim:".
	Instruction string `toml:"instruction"`
	// TrainClaims, when > 0, trains on the first n claims of the train split (by id): a slice.
	// 0: all. >= 0.
	TrainClaims int `toml:"train_claims"`
	// CorpusSample, when > 0, retrieves from a sample of the corpus instead of all of it: every
	// passage the eval splits judge plus n others drawn with the seed (training claims then
	// retrieve from the sample too); numbers are not comparable with the whole corpus's. 0: the
	// whole corpus. >= 0.
	CorpusSample int `toml:"corpus_sample"`
	// CacheEvery is the claims the LM scores between two writes of the score cache (a resumed
	// run keeps what was written); >= 1. Default 16.
	CacheEvery int `toml:"cache_every"`
	// LMCache, when set, is another run's lm_scores.tsv whose scores this run starts from
	// (verified as the run's own: same LM file, layout, instruction and token bounds, else
	// refused): choices on dev (tau_lm, tau_r, lr, steps) without scoring the pairs again.
	// Relative to the recipe's directory. Default "" (none).
	LMCache string `toml:"lm_cache"`
}

func defaultConfig() Config {
	return Config{TopK: 8, TauR: 0.05, TauLM: 1, AbstractTokens: 224, ClaimTokens: 96, Instruction: "Claim:", CacheEvery: 16}
}

func check(v *configs.Checker, _ *configs.Recipe, c *Config) {
	if c.LM == "" {
		v.Fail("replug_lm.lm", "required: a LLaMA GGUF file (e.g. SmolLM2-135M-Instruct)")
	}
	v.File("replug_lm.lm", &c.LM)
	configs.AtLeast(v, "replug_lm.top_k", c.TopK, 2)
	if c.TopK > maxTopK {
		v.Fail("replug_lm.top_k", "must be <= %d, got %d", maxTopK, c.TopK)
	}
	v.Positive("replug_lm.tau_r", c.TauR)
	v.Positive("replug_lm.tau_lm", c.TauLM)
	configs.AtLeast(v, "replug_lm.abstract_tokens", c.AbstractTokens, 16)
	if c.AbstractTokens > maxAbstractTokens {
		v.Fail("replug_lm.abstract_tokens", "must be <= %d, got %d", maxAbstractTokens, c.AbstractTokens)
	}
	configs.AtLeast(v, "replug_lm.claim_tokens", c.ClaimTokens, 4)
	if c.ClaimTokens > maxClaimTokens {
		v.Fail("replug_lm.claim_tokens", "must be <= %d, got %d", maxClaimTokens, c.ClaimTokens)
	}
	if len(c.Instruction) > 1024 {
		v.Fail("replug_lm.instruction", "must be at most 1024 bytes, got %d", len(c.Instruction))
	}
	configs.AtLeast(v, "replug_lm.train_claims", c.TrainClaims, 0)
	configs.AtLeast(v, "replug_lm.corpus_sample", c.CorpusSample, 0)
	configs.AtLeast(v, "replug_lm.cache_every", c.CacheEvery, 1)
	if c.LMCache != "" {
		v.File("replug_lm.lm_cache", &c.LMCache)
	}
}
