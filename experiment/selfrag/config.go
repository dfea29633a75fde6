package selfrag

import (
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/export"
)

// section is the [selfrag] table of the recipe, which this kind owns (configs.Section): Load
// decodes it with Config's defaults and checks it with check.
var section = configs.NewSection("selfrag", defaultConfig, check)

// Of returns the [selfrag] section of a recipe.
func Of(r *configs.Recipe) *Config { return configs.SectionOf[Config](r, "selfrag") }

// Config is the [selfrag] section of kind = "selfrag": a reader fine-tuned with Self-RAG
// reflection tokens (Asai et al. 2024) on the garden world of [world], and decoding driven by
// them. The reader is the one of [reader] (pretrained as a language model, fine-tuned as a plain
// reader exactly as kind = "rag" does), then grown by the seven reflection tokens and fine-tuned
// again on reflective targets; [index] gives BM25, the retriever of every reader system.
type Config struct {
	// RowLength is L of single-passage reader sequences ("[CLS] <ctx> passage </ctx> question
	// target [SEP]") in fine-tuning and per-passage decoding; reader.max_length is the longest
	// sequence (top_k passages concatenated into one context, and the packed pretraining rows);
	// in [8, reader.max_length]. Default 48.
	RowLength int `toml:"row_length"`
	// IrrelevantFraction is the fraction of the reflective fine-tuning contexts that are not
	// the gardener's entry (BM25 hits for the question other than the entry: news mentioning
	// the name, other gardeners' entries); in [0, 1]. Default 0.4.
	IrrelevantFraction float64 `toml:"irrelevant_fraction"`
	// RelevanceLossWeight gives the IsRel decisions ([Relevant] / [Irrelevant], one per context)
	// a loss term of their own: their mean NLL times this weight, added to the mean NLL of the
	// other target tokens. 0: they are ordinary target tokens. >= 0; default 0.
	RelevanceLossWeight float64 `toml:"relevance_loss_weight"`
	// PairFraction is the fraction of the relevant contexts followed in their batch by their
	// minimal-pair negative: the same passage, the question about a gardener of the same first
	// name and another surname, target [Irrelevant]; in [0, 1]. Default 0.
	PairFraction float64 `toml:"pair_fraction"`
	// EntryNegativeFraction is the fraction of the irrelevant contexts that are the entry of
	// another training gardener of the same first name (the hard negatives: only the surnames
	// differ) rather than news naming the gardener, when the question has both; in [0, 1].
	// Default 0.5.
	EntryNegativeFraction float64 `toml:"entry_negative_fraction"`
	// UnsupportedFraction is the fraction of the relevant contexts (the gardener's entry)
	// whose sentence stating the asked fact is removed, the target then ending in [No support];
	// in [0, 1]. Default 0.1.
	UnsupportedFraction float64 `toml:"unsupported_fraction"`
	// RenameFraction is the fraction of the reflective fine-tuning contexts in which the
	// gardener gets an invented surname throughout (question, passage, target): relevance must
	// then be judged by comparing names, not recalled for the training gardeners; in [0, 1].
	// Default 0.5.
	RenameFraction float64 `toml:"rename_fraction"`
	// RenameSurnames is where a renamed gardener's surname comes from: "world" (the surname of
	// a random gardener of the world, never making an existing name: one WordPiece token, as
	// the test gardeners' surnames are, so the reader learns to compare single name tokens) or
	// "invented" (garden.InventSurname: mostly 2-4 pieces, which did not carry over to the
	// test gardeners' one-token surnames). Default "world".
	RenameSurnames string `toml:"rename_surnames"`
	// RetrieveConfidence labels a training question [No Retrieve] when the closed-book reader
	// (the language model's cloze completion) is right on it with at least this probability,
	// else [Retrieve]; in [0, 1]. Default 0.5.
	RetrieveConfidence float64 `toml:"retrieve_confidence"`
	// FinetuneSteps is the number of reflective fine-tuning steps (loss on the target tokens,
	// reader.replay pretraining rows replayed per step); >= 0. Default 800.
	FinetuneSteps int `toml:"finetune_steps"`
	// BatchSize is the training questions per reflective fine-tuning step; >= 1. Default 48.
	BatchSize int `toml:"batch_size"`
	// LR is the peak AdamW learning rate of reflective fine-tuning; > 0. Default 0.001.
	LR float64 `toml:"lr"`
	// TopK is K, the BM25 passages the reflective decoder scores one by one (and the
	// concatenation baseline joins); >= 1. Default 3.
	TopK int `toml:"top_k"`
	// RetrieveThreshold: the decoder retrieves when P([Retrieve]) / (P([Retrieve]) +
	// P([No Retrieve])) after the closed-book question is at least this; in [0, 1] (0: always
	// retrieve). Default 0.5.
	RetrieveThreshold float64 `toml:"retrieve_threshold"`
	// RelevanceThreshold: a passage may be answered from when P([Relevant]) / (P([Relevant]) +
	// P([Irrelevant])) is at least this; in [0, 1]. Default 0.5.
	RelevanceThreshold float64 `toml:"relevance_threshold"`
	// SupportWeight weighs the support score (P([Fully supported]) + P([Partially
	// supported])/2 over the three IsSup tokens) against relevance when choosing among passages
	// that pass the relevance threshold; >= 0. Default 1.
	SupportWeight float64 `toml:"support_weight"`
}

func defaultConfig() Config {
	d := export.DefaultSelfRAGDecoding() // the decoding policy an export records without the recipe
	return Config{
		RowLength: d.RowLength, IrrelevantFraction: 0.4, EntryNegativeFraction: 0.5, UnsupportedFraction: 0.1, RenameFraction: 0.5, RenameSurnames: "world", RetrieveConfidence: 0.5,
		FinetuneSteps: 800, BatchSize: 48, LR: 1e-3,
		TopK: d.TopK, RetrieveThreshold: d.RetrieveThreshold, RelevanceThreshold: d.RelevanceThreshold, SupportWeight: d.SupportWeight,
	}
}

// check validates [selfrag] within the recipe r (the world and the reader are configs').
func check(v *configs.Checker, r *configs.Recipe, s *Config) {
	configs.AtLeast(v, "selfrag.row_length", s.RowLength, 8)
	if s.RowLength > r.Reader.MaxLength {
		v.Fail(v.SetOf("selfrag.row_length", "reader.max_length"), "selfrag.row_length = %d exceeds reader.max_length = %d", s.RowLength, r.Reader.MaxLength)
	}
	v.InRange("selfrag.irrelevant_fraction", s.IrrelevantFraction, 0, 1, true)
	v.NonNegative("selfrag.relevance_loss_weight", s.RelevanceLossWeight)
	v.InRange("selfrag.pair_fraction", s.PairFraction, 0, 1, true)
	v.InRange("selfrag.entry_negative_fraction", s.EntryNegativeFraction, 0, 1, true)
	v.InRange("selfrag.unsupported_fraction", s.UnsupportedFraction, 0, 1, true)
	v.InRange("selfrag.rename_fraction", s.RenameFraction, 0, 1, true)
	v.OneOf("selfrag.rename_surnames", s.RenameSurnames, []string{"world", "invented"})
	v.InRange("selfrag.retrieve_confidence", s.RetrieveConfidence, 0, 1, true)
	configs.AtLeast(v, "selfrag.finetune_steps", s.FinetuneSteps, 0)
	configs.AtLeast(v, "selfrag.batch_size", s.BatchSize, 1)
	v.Positive("selfrag.lr", s.LR)
	configs.AtLeast(v, "selfrag.top_k", s.TopK, 1)
	v.InRange("selfrag.retrieve_threshold", s.RetrieveThreshold, 0, 1, true)
	v.InRange("selfrag.relevance_threshold", s.RelevanceThreshold, 0, 1, true)
	v.NonNegative("selfrag.support_weight", s.SupportWeight)
}
