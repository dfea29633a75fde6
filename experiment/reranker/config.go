package reranker

import (
	"fmt"
	"os"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/model"
)

// section is the [rerank] table of the recipe, which this kind owns (configs.Section): Load
// decodes it with Config's defaults and checks it with check.
var section = configs.NewSection("rerank", defaultConfig, check)

// Of returns the [rerank] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "rerank") }

// Config is the [rerank] section of kind = "reranker".
type Config struct {
	// FirstStage produces the candidates: "bm25", a dense retriever's run
	// directory (its latest checkpoint encodes the corpus), or a TREC run file
	// (qid Q0 docid rank score tag) ranking every training and evaluated
	// query; paths relative to the recipe file. Default "bm25".
	FirstStage string `toml:"first_stage"`
	// Candidates is K, the first-stage hits reranked per evaluated query; >= 1.
	// Default 100.
	Candidates int `toml:"candidates"`
	// TrainDepth is N, the first-stage hits per training query that the
	// negatives of its training lists are drawn from; >= 1. Default 30.
	TrainDepth int `toml:"train_depth"`
	// ListSize is the passages per training list (one or more relevant);
	// 2 <= list_size <= candidates. Default 8.
	ListSize int `toml:"list_size"`
	// DropAboveFirstPositive drops candidates ranked above the first judged
	// relevant one from training lists, as suspected false negatives.
	// Default false.
	DropAboveFirstPositive bool `toml:"drop_above_first_positive"`
	// Losses are the reranker losses trained and compared, each once:
	// "pairwise", "listwise", "pointwise".
	// Default ["pairwise", "listwise", "pointwise"].
	Losses []string `toml:"losses"`
	// Interpolate also reports alpha * s_first + (1 - alpha) * s_rerank with
	// both min-max normalised per query and alpha chosen on the dev split.
	// Default true.
	Interpolate bool `toml:"interpolate"`
	// MatchInit is the gain added, as gain·I, to the query and key
	// projections of the cross-encoder's first layer before training
	// (model.CrossEncoder.InitMatching: a prior for term matching); 0 = off;
	// >= 0. Default 0.
	MatchInit float64 `toml:"match_init"`
	// PretrainDepth is the BM25 hits of a cropped pseudo-query that the
	// negatives of its pretraining list are drawn from (pretrain.steps > 0);
	// a depth past the corpus size draws from every passage sharing a word
	// with it; >= 1. Default 30.
	PretrainDepth int `toml:"pretrain_depth"`
	// PretrainWindow, when > 0, cuts the cropped pseudo-queries from the
	// first pretrain_window words of a passage, the part the cross-encoder
	// sees at tokenizer.max_length; 0 = anywhere in the passage; >= 0.
	// Default 0.
	PretrainWindow int `toml:"pretrain_window"`
	// MatchWordScale multiplies the cross-encoder's initial word embeddings
	// (model.CrossEncoder.InitMatching), so that a token's word dominates
	// its position and segment; > 0. Default 1.0.
	MatchWordScale float64 `toml:"match_word_scale"`
}

// rerankLosses are the reranker losses rerank.losses may list.
var rerankLosses = []string{"pairwise", "listwise", "pointwise"}

func defaultConfig() Config {
	return Config{FirstStage: "bm25", Candidates: 100, TrainDepth: 30, ListSize: 8, PretrainDepth: 30, MatchWordScale: 1,
		Losses: []string{"pairwise", "listwise", "pointwise"}, Interpolate: true}
}

// check validates [rerank] within the recipe r and makes a first_stage path absolute against the
// recipe's directory.
func check(v *configs.Checker, r *configs.Recipe, rr *Config) {
	switch rr.FirstStage {
	case "":
		v.Fail("rerank.first_stage", `must be "bm25", a run directory or a TREC run file`)
	case "bm25":
	default:
		rr.FirstStage = v.Abs(rr.FirstStage)
		if _, err := os.Stat(rr.FirstStage); err != nil {
			v.Fail("rerank.first_stage", `not "bm25" and not a run directory: %v`, err)
		}
	}
	configs.AtLeast(v, "rerank.candidates", rr.Candidates, 1)
	configs.AtLeast(v, "rerank.train_depth", rr.TrainDepth, 1)
	configs.AtLeast(v, "rerank.list_size", rr.ListSize, 2)
	v.NonNegative("rerank.match_init", rr.MatchInit)
	configs.AtLeast(v, "rerank.pretrain_depth", rr.PretrainDepth, 1)
	configs.AtLeast(v, "rerank.pretrain_window", rr.PretrainWindow, 0)
	v.Positive("rerank.match_word_scale", rr.MatchWordScale)
	if rr.ListSize > rr.Candidates {
		v.Fail(v.SetOf("rerank.list_size", "rerank.candidates"), "rerank.list_size = %d exceeds rerank.candidates = %d", rr.ListSize, rr.Candidates)
	}
	if rr.Interpolate && r.Data.DevSplit == "" {
		v.Fail(v.SetOf("rerank.interpolate", "data.dev_split"), "rerank.interpolate chooses alpha on data.dev_split, which is empty")
	}
	if len(rr.Losses) == 0 {
		v.Fail("rerank.losses", "must name at least one of %s", configs.QuoteList(rerankLosses))
	}
	v.DistinctOf("rerank.losses", rr.Losses, rerankLosses)
}

// Memory is the cross-encoder cfg of a reranker recipe at its largest step:
// rerank.list_size (query, passage) sequences of tokenizer.max_length tokens for each of
// train.batch_size queries, or of pretrain.batch_size crops.
func Memory(rec *configs.Recipe, cfg model.EncoderConfig) experiment.MemoryPart {
	L := rec.Tokenizer.MaxLength
	rows := rec.Train.BatchSize
	if rec.Pretrain.Steps > 0 {
		rows = max(rows, rec.Pretrain.BatchSize)
	}
	s := model.TrainingShape{Towers: 1, Tokens: rows * Of(rec).ListSize * L, Length: L}
	return experiment.MemoryPart{Cfg: cfg, Shape: s, Keys: experiment.Describe("model", cfg) + fmt.Sprintf(
		", tokenizer.max_length = %d, %d tokens a step (train.batch_size, pretrain.batch_size, rerank.list_size)", L, s.Tokens)}
}
