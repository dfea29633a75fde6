package configs

import (
	"errors"
	"slices"

	"github.com/ragtrain/ragtrain/data/garden"
)

// The sections read by kind = "rag": the synthetic world the data comes from ([world], the
// keys of garden.Config), the generative reader ([reader]) and the joint retriever-reader
// training ([rag]). The bi-encoder is the one of [model], warmed up without labels by the
// cropping phase of [pretrain]; [train] gives the optimiser settings every phase shares.

// Reader is the [reader] section: a decoder-only causal Transformer with tied embeddings,
// pretrained as a language model on the world's corpus and fine-tuned as a reader.
type Reader struct {
	// Hidden is H; a multiple of heads; >= 1. Default 128.
	Hidden int `toml:"hidden"`
	// Layers is the number of Transformer blocks; >= 1. Default 2.
	Layers int `toml:"layers"`
	// Heads is the number of attention heads; >= 1. Default 4.
	Heads int `toml:"heads"`
	// FFN is the feed-forward inner width; >= 1. Default 512.
	FFN int `toml:"ffn"`
	// Dropout is the dropout probability in training, in [0, 1). Default 0.1.
	Dropout float64 `toml:"dropout"`
	// MaxLength is L of the reader's sequences ([CLS], context, question, answer, [SEP]);
	// longer contexts are cut; >= 8. Default 48.
	MaxLength int `toml:"max_length"`
	// PretrainPasses is the number of passes of language-model pretraining over the world's
	// corpus; 0 turns it off; >= 0. Default 1.
	PretrainPasses int `toml:"pretrain_passes"`
	// PretrainBatchSize is the rows of packed documents per pretraining step; >= 1. Default 64.
	PretrainBatchSize int `toml:"pretrain_batch_size"`
	// PretrainLR is the peak AdamW learning rate of pretraining; > 0. Default 0.001.
	PretrainLR float64 `toml:"pretrain_lr"`
	// FinetuneSteps is the number of reader fine-tuning steps; >= 0. Default 800.
	FinetuneSteps int `toml:"finetune_steps"`
	// FinetuneBatchSize is the training questions per fine-tuning step; >= 1. Default 48.
	FinetuneBatchSize int `toml:"finetune_batch_size"`
	// FinetuneLR is the peak AdamW learning rate of fine-tuning; > 0. Default 0.001.
	FinetuneLR float64 `toml:"finetune_lr"`
	// Replay is the rows of packed pretraining documents replayed in every fine-tuning step
	// against forgetting; >= 0. Default 16.
	Replay int `toml:"replay"`
	// ClosedBookFraction is the fraction of fine-tuning questions asked with an empty context
	// (the others get the gardener's entry when the datastore has one); in [0, 1]. Default 0.3.
	ClosedBookFraction float64 `toml:"closed_book_fraction"`
	// CounterfactualFraction is the fraction of the other fine-tuning questions whose passage
	// states another value of the asked fact's type, the answer changed to match (the answer
	// can only be read, not recalled); in [0, 1]. Default 1.
	CounterfactualFraction float64 `toml:"counterfactual_fraction"`
	// MaxAnswerTokens is the most tokens greedy decoding generates before [SEP]; >= 1.
	// Default 3.
	MaxAnswerTokens int `toml:"max_answer_tokens"`
	// InitFrom is a directory whose weights initialise the reader before pretraining and
	// fine-tuning (export.OpenReader): a rag export of `train export` (GPT-2 layout), a Hugging
	// Face GPT-2 directory (GPT2LMHeadModel safetensors, activation_function "gelu") or a rag run
	// directory. Its sizes must be [reader]'s and its tokenizer.json the run's (set
	// tokenizer.file to it when the vocabulary is not trained the same way); relative to the
	// recipe file. Default "" (random initialisation).
	InitFrom string `toml:"init_from"`
}

// RAG is the [rag] section: joint training of the query tower and the reader with the RAG
// marginal likelihood, passage embeddings fixed by the index built at its start.
type RAG struct {
	// Chunking is the datastore chunking retrieved from: "entry", "sentence" or "window".
	// Default "entry".
	Chunking string `toml:"chunking"`
	// CandidateSource gives each question its K candidates: "dense" (top K of the exact
	// inner-product index) or "bm25+dense" (BM25's top bm25_depth rescored by the dense
	// retriever). Default "dense".
	CandidateSource string `toml:"candidate_source"`
	// BM25Depth is the BM25 hits rescored under "bm25+dense"; >= top_k. Default 20.
	BM25Depth int `toml:"bm25_depth"`
	// TopK is K, the candidates per question; >= 1. Default 4.
	TopK int `toml:"top_k"`
	// CandidateMass normalises the retrieval distribution: "renormalize" (softmax over the K
	// candidates) or "full" (over the whole datastore, exact with the flat index).
	// Default "renormalize".
	CandidateMass string `toml:"candidate_mass"`
	// Objectives are the joint objectives trained, each from the same start and compared:
	// "sequence" (RAG-Sequence) and "token" (RAG-Token). Default ["sequence", "token"].
	Objectives []string `toml:"objectives"`
	// Steps is the joint training steps per objective; >= 0. Default 200.
	Steps int `toml:"steps"`
	// BatchSize is the training questions per joint step; >= 1. Default 16.
	BatchSize int `toml:"batch_size"`
	// LR is the peak AdamW learning rate of joint training; > 0. Default 0.0005.
	LR float64 `toml:"lr"`
	// UpdateReader trains the reader jointly with the query tower (false: the query tower
	// alone). Default true.
	UpdateReader bool `toml:"update_reader"`
	// HeldOutQuestions gives joint training the questions of half the training gardeners
	// (alternate ones) and reader fine-tuning the other half, so that the reader has not
	// memorised the answers joint training asks for (false: both use every training
	// gardener). Default true.
	HeldOutQuestions bool `toml:"held_out_questions"`
}

var (
	chunkings        = []string{"entry", "sentence", "window"}
	candidateSources = []string{"dense", "bm25+dense"}
	candidateMasses  = []string{"renormalize", "full"}
	ragObjectives    = []string{"sequence", "token"}
)

func defaultReader() Reader {
	return Reader{
		Hidden: 128, Layers: 2, Heads: 4, FFN: 512, Dropout: 0.1, MaxLength: 48,
		PretrainPasses: 1, PretrainBatchSize: 64, PretrainLR: 1e-3,
		FinetuneSteps: 800, FinetuneBatchSize: 48, FinetuneLR: 1e-3, Replay: 16,
		ClosedBookFraction: 0.3, CounterfactualFraction: 1, MaxAnswerTokens: 3,
	}
}

func defaultRAG() RAG {
	return RAG{
		Chunking: "entry", CandidateSource: "dense", BM25Depth: 20, TopK: 4,
		CandidateMass: "renormalize", Objectives: []string{"sequence", "token"},
		Steps: 200, BatchSize: 16, LR: 5e-4, UpdateReader: true, HeldOutQuestions: true,
	}
}

// validateRAG checks [world], [reader] and [rag]. The world's limits are garden.Config's own
// (Validate names the key of the first impossible value).
func validateRAG(v *Checker, r *Recipe) {
	if err := r.World.Validate(); err != nil {
		var ke *garden.KeyError
		if errors.As(err, &ke) {
			v.Fail(ke.Key, "%s", ke.Msg)
		} else {
			v.Fail("world", "%v", err)
		}
	}

	rd := r.Reader
	AtLeast(v, "reader.hidden", rd.Hidden, 1)
	AtLeast(v, "reader.layers", rd.Layers, 1)
	AtLeast(v, "reader.heads", rd.Heads, 1)
	if rd.Heads > 0 && rd.Hidden%rd.Heads != 0 {
		v.Fail(v.SetOf("reader.heads", "reader.hidden"), "reader.hidden = %d is not a multiple of reader.heads = %d", rd.Hidden, rd.Heads)
	}
	AtLeast(v, "reader.ffn", rd.FFN, 1)
	v.InRange("reader.dropout", rd.Dropout, 0, 1, false)
	AtLeast(v, "reader.max_length", rd.MaxLength, 8)
	AtLeast(v, "reader.pretrain_passes", rd.PretrainPasses, 0)
	AtLeast(v, "reader.pretrain_batch_size", rd.PretrainBatchSize, 1)
	v.Positive("reader.pretrain_lr", rd.PretrainLR)
	AtLeast(v, "reader.finetune_steps", rd.FinetuneSteps, 0)
	AtLeast(v, "reader.finetune_batch_size", rd.FinetuneBatchSize, 1)
	v.Positive("reader.finetune_lr", rd.FinetuneLR)
	AtLeast(v, "reader.replay", rd.Replay, 0)
	v.InRange("reader.closed_book_fraction", rd.ClosedBookFraction, 0, 1, true)
	v.InRange("reader.counterfactual_fraction", rd.CounterfactualFraction, 0, 1, true)
	AtLeast(v, "reader.max_answer_tokens", rd.MaxAnswerTokens, 1)

	g := r.RAG
	v.OneOf("rag.chunking", g.Chunking, chunkings)
	v.OneOf("rag.candidate_source", g.CandidateSource, candidateSources)
	AtLeast(v, "rag.top_k", g.TopK, 1)
	if g.CandidateSource == "bm25+dense" && g.BM25Depth < g.TopK {
		v.Fail(v.SetOf("rag.bm25_depth", "rag.top_k"), "rag.bm25_depth = %d is below rag.top_k = %d", g.BM25Depth, g.TopK)
	}
	v.OneOf("rag.candidate_mass", g.CandidateMass, candidateMasses)
	if g.CandidateMass == "full" && slices.Contains(g.Objectives, "token") {
		v.Fail(v.SetOf("rag.candidate_mass", "rag.objectives"), `rag.candidate_mass = "full" is implemented for the "sequence" objective only (losses.RAGSequenceFull); drop "token" from rag.objectives`)
	}
	if len(g.Objectives) == 0 {
		v.Fail("rag.objectives", "must name at least one of %s", quoteList(ragObjectives))
	}
	v.DistinctOf("rag.objectives", g.Objectives, ragObjectives)
	AtLeast(v, "rag.steps", g.Steps, 0)
	AtLeast(v, "rag.batch_size", g.BatchSize, 1)
	v.Positive("rag.lr", g.LR)
}
