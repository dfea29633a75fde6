package scifactverify

import (
	"slices"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/model"
)

// section is the [scifact_verify] table, owned by this kind.
var section = configs.NewSection("scifact_verify", defaultConfig, check)

// Of returns the [scifact_verify] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "scifact_verify") }

// searchPoint is scifact_verify.eval_split's value for a search point: the dev choice alone,
// no split read for evaluation.
const searchPoint = "none"

// The systems a run may evaluate (issue 39): the reader (closed-book SmolLM2-Instruct, the plain
// LoRA reader, the Self-RAG reader) and where its abstracts come from (BM25 or a MiniLM run over
// the whole corpus; oracle: the claim's cited abstracts).
var allSystems = []string{"closedbook_bm25", "closedbook_minilm", "plain_bm25", "plain_minilm",
	"selfrag_bm25", "selfrag_minilm", "oracle_plain", "oracle_selfrag"}

// Config is the [scifact_verify] section. The claims are data.dir/verify/claims_<split>.jsonl
// and the abstracts, as sentence lists, data.dir/verify/corpus.jsonl (datasets/scifact/verify).
type Config struct {
	// InitFrom is the pretrained LLaMA GGUF (SmolLM2-135M-Instruct; its tokenizer too),
	// relative to the recipe's directory; required.
	InitFrom string `toml:"init_from"`
	// Systems are the systems evaluated on EvalSplit, among closedbook_bm25, closedbook_minilm,
	// plain_bm25, plain_minilm, selfrag_bm25, selfrag_minilm, oracle_plain, oracle_selfrag.
	// Default: all eight.
	Systems []string `toml:"systems"`
	// EvalSplit is the split whose claims are verified and scored ("dev" to choose, "test"
	// once), or "none": a search point that chooses the Self-RAG decoder's settings on
	// data.dev_split (select_*) and reads no other split, so that runs differing in LoRA rank,
	// steps or abstract_tokens compare by dev/<system>/abstract_label_only/f1 without touching
	// test (systems must then all be Self-RAG systems). Default "test".
	EvalSplit string `toml:"eval_split"`
	// MaxEvalClaims, when > 0, verifies only the first n claims of EvalSplit (by id), and of
	// the dev split where settings are chosen there: a slice, said so in the metrics
	// (<split>/claims). Default 0 (all).
	MaxEvalClaims int `toml:"max_eval_claims"`
	// MinilmRun is a TREC run of the MiniLM retriever over the whole corpus for EvalSplit's
	// claims (e.g. a retriever run's runs/test.dense.trec); "{split}" is replaced by EvalSplit.
	// Required when a *_minilm system is asked for; read at the start of the run.
	MinilmRun string `toml:"minilm_run"`
	// TrainK is the number of BM25 abstracts per training claim turned into training pairs
	// besides its gold evidence abstracts (those not in the evidence are the irrelevant /
	// no-support pairs). Default 3.
	TrainK int `toml:"train_k"`
	// TopK is the number of retrieved abstracts the Self-RAG decoder scores per claim.
	// Default 3.
	TopK int `toml:"top_k"`
	// RelThreshold: the Self-RAG decoder keeps an abstract only when p([Relevant]) /
	// (p([Relevant]) + p([Irrelevant])) >= RelThreshold; in [0,1]. Default 0.5.
	RelThreshold float64 `toml:"rel_threshold"`
	// SelectTopK and SelectRelThreshold, when either is set, choose each Self-RAG system's
	// top_k and rel_threshold on data.dev_split before eval_split is read (select.go): the
	// grid's best abstract Label-Only F1 on dev. An unset one holds top_k or rel_threshold
	// alone. k in [1,100] (at most 100 values), thresholds in [0,1] (at most 101); eval_split
	// must not be the dev split, and the *_minilm systems need minilm_run for both splits
	// ("{split}").
	SelectTopK         []int     `toml:"select_top_k"`
	SelectRelThreshold []float64 `toml:"select_rel_threshold"`
	// MaxLength is L, the tokens of a training sequence and of a decoded one; 64..8192 and at
	// most the model's context. Default 320.
	MaxLength int `toml:"max_length"`
	// AbstractTokens bounds a passage's tokens: an abstract is read as passages of its title
	// and whole numbered sentences that fit (format.windows; a sentence that alone does not fit
	// is cut), each judged alone; >= 16. Default 224.
	AbstractTokens int `toml:"abstract_tokens"`
	// LoRA of each fine-tuned reader (model.LoRAConfig, peft's names): rank >= 1, alpha > 0,
	// dropout in [0,1), targets among q_proj k_proj v_proj o_proj gate_proj up_proj down_proj.
	// Defaults 8, 16, 0.05, all seven.
	LoRARank    int      `toml:"lora_rank"`
	LoRAAlpha   float64  `toml:"lora_alpha"`
	LoRADropout float64  `toml:"lora_dropout"`
	LoRATargets []string `toml:"lora_targets"`
}

func defaultConfig() Config {
	return Config{Systems: slices.Clone(allSystems), EvalSplit: "test", TrainK: 3, TopK: 3, RelThreshold: 0.5,
		MaxLength: 320, AbstractTokens: 224, LoRARank: 8, LoRAAlpha: 16, LoRADropout: 0.05,
		LoRATargets: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
}

func check(v *configs.Checker, r *configs.Recipe, c *Config) {
	if c.InitFrom == "" {
		v.Fail("scifact_verify.init_from", "required: a LLaMA GGUF file")
	}
	v.File("scifact_verify.init_from", &c.InitFrom)
	if len(c.Systems) == 0 {
		v.Fail("scifact_verify.systems", "must name at least one system")
	}
	v.DistinctOf("scifact_verify.systems", c.Systems, allSystems)
	v.OneOf("scifact_verify.eval_split", c.EvalSplit, []string{"train", "dev", "test", searchPoint})
	if c.EvalSplit == searchPoint {
		if !c.selecting() {
			v.Fail("scifact_verify.eval_split", `"none" reads only the dev choice: set select_top_k or select_rel_threshold`)
		}
		if c.wants(func(s string) bool { return !isSelfRAG(s) }) {
			v.Fail("scifact_verify.eval_split", `"none" reads only the dev choice, which the Self-RAG systems alone make: systems must be among selfrag_bm25, selfrag_minilm, oracle_selfrag, got %q`, c.Systems)
		}
	}
	configs.AtLeast(v, "scifact_verify.max_eval_claims", c.MaxEvalClaims, 0)
	if c.MinilmRun != "" {
		c.MinilmRun = v.Abs(c.MinilmRun)
	}
	configs.AtLeast(v, "scifact_verify.train_k", c.TrainK, 0)
	configs.AtLeast(v, "scifact_verify.top_k", c.TopK, 1)
	if c.TopK > 100 {
		v.Fail("scifact_verify.top_k", "must be <= 100, got %d", c.TopK)
	}
	v.InRange("scifact_verify.rel_threshold", c.RelThreshold, 0, 1, true)
	if len(c.SelectTopK) > 100 || len(c.SelectRelThreshold) > 101 {
		v.Fail("scifact_verify.select_top_k", "the dev grid holds at most 100 k and 101 thresholds, got %d and %d", len(c.SelectTopK), len(c.SelectRelThreshold))
	}
	for _, k := range c.SelectTopK {
		if k < 1 || k > 100 {
			v.Fail("scifact_verify.select_top_k", "each k must be in [1, 100], got %d", k)
		}
	}
	for _, t := range c.SelectRelThreshold {
		v.InRange("scifact_verify.select_rel_threshold", t, 0, 1, true)
	}
	if c.selecting() {
		if r.Data.DevSplit == "" || c.EvalSplit == r.Data.DevSplit {
			v.Fail("scifact_verify.eval_split", "select_top_k / select_rel_threshold choose on data.dev_split and report on eval_split: they must differ (dev_split %q, eval_split %q)",
				r.Data.DevSplit, c.EvalSplit)
		}
		if !c.wants(isSelfRAG) {
			v.Fail("scifact_verify.select_top_k", "chooses the Self-RAG decoder's settings: systems must hold selfrag_bm25, selfrag_minilm or oracle_selfrag")
		}
	}
	configs.AtLeast(v, "scifact_verify.abstract_tokens", c.AbstractTokens, 16)
	configs.AtLeast(v, "scifact_verify.max_length", c.MaxLength, 64)
	if c.MaxLength > 8192 {
		v.Fail("scifact_verify.max_length", "must be <= 8192, got %d", c.MaxLength)
	}
	if c.MaxLength < c.AbstractTokens+claimTokens+reserveTokens {
		v.Fail("scifact_verify.max_length", "must hold the claim (%d tokens), the abstract (abstract_tokens = %d) and the answer (%d): at least %d, got %d",
			claimTokens, c.AbstractTokens, reserveTokens, c.AbstractTokens+claimTokens+reserveTokens, c.MaxLength)
	}
	if err := c.lora().Validate(); err != nil { // rank, alpha, dropout, targets: the key its message names
		key := "scifact_verify.lora_targets"
		for _, k := range []string{"rank", "alpha", "dropout"} {
			if strings.Contains(err.Error(), "lora "+k+" =") {
				key = "scifact_verify.lora_" + k
			}
		}
		v.Fail(key, "%v", err)
	}
}

// lora is the model.LoRAConfig of the section.
func (c *Config) lora() model.LoRAConfig {
	return model.LoRAConfig{Rank: c.LoRARank, Alpha: c.LoRAAlpha, Dropout: c.LoRADropout, Targets: slices.Clone(c.LoRATargets)}
}

// selecting reports whether the Self-RAG decoder's settings are chosen on dev.
func (c *Config) selecting() bool { return len(c.SelectTopK) > 0 || len(c.SelectRelThreshold) > 0 }

// grid returns the candidate k and thresholds, each sorted ascending and distinct (top_k or
// rel_threshold alone where the recipe sets no list).
func (c *Config) grid() ([]int, []float64) {
	ks, ts := slices.Clone(c.SelectTopK), slices.Clone(c.SelectRelThreshold)
	if len(ks) == 0 {
		ks = []int{c.TopK}
	}
	if len(ts) == 0 {
		ts = []float64{c.RelThreshold}
	}
	slices.Sort(ks)
	slices.Sort(ts)
	return slices.Compact(ks), slices.Compact(ts)
}

// depth is the number of abstracts ranked per eval (and dev) claim: top_k, or the grid's largest.
func (c *Config) depth() int {
	ks, _ := c.grid()
	return max(c.TopK, ks[len(ks)-1], 1)
}

// wants reports whether any of the asked systems has the suffix or prefix s.
func (c *Config) wants(match func(string) bool) bool { return slices.ContainsFunc(c.Systems, match) }
