package configs

import (
	"fmt"

	"github.com/ragtrain/ragtrain/data/garden"
)

// Recipe is one training recipe: everything a run needs, read from a TOML
// file by Load. Field comments give each key's default and meaning; doc.go
// has the same as a table. After Load every path is absolute and every key
// holds a value (its default when the file did not set it).
type Recipe struct {
	// Kind is what the recipe trains: "retriever" (dense bi-encoder),
	// "reranker" (cross-encoder), "rag", "selfrag", "replug" or "realm".
	// Default "retriever".
	Kind string `toml:"kind"`
	// Name names the run; run directories are <output_dir>/<name>-<timestamp>.
	// Default: the recipe file's base name without ".toml".
	Name string `toml:"name"`
	// Seed seeds every random choice (initialisation, sampling, dropout);
	// must be >= 0. Default 42.
	Seed int64 `toml:"seed"`
	// OutputDir is the directory below which run directories are created,
	// relative to the recipe file. Default "runs".
	OutputDir string `toml:"output_dir"`

	Data      Data      `toml:"data"`
	Tokenizer Tokenizer `toml:"tokenizer"`
	Model     Model     `toml:"model"`
	Loss      Loss      `toml:"loss"`
	Sampler   Sampler   `toml:"sampler"`
	Pretrain  Pretrain  `toml:"pretrain"`
	Train     Train     `toml:"train"`
	Index     Index     `toml:"index"`
	Eval      Eval      `toml:"eval"`
	// World, Reader and RAG are read by kind = "rag" (rag.go).
	World  garden.Config `toml:"world"`
	Reader Reader        `toml:"reader"`
	RAG    RAG           `toml:"rag"`
	// Realm and IndexRefresh are read by the garden retriever studies: kind = "realm", and
	// "replug" and "atlas" for realm.checkpoint_every and [index_refresh] (realm.go).
	Realm        Realm        `toml:"realm"`
	IndexRefresh IndexRefresh `toml:"index_refresh"`

	// sections holds the sections the kind owns (KindSpec.Own), by name: a pointer to the
	// struct each Section.New returns; SectionOf reads them.
	sections map[string]any

	// Path is the recipe file as Load was given it, and Lines the 1-based line of every key
	// the file sets ("model.hidden": 12), so that a check made after Load (e.g. against the
	// model.init_from checkpoint) can name the key's line. Neither is a recipe key.
	Path  string         `toml:"-"`
	Lines map[string]int `toml:"-"`
}

// Values returns a copy of r without Path and Lines: the recipe's settings alone, for
// comparing two recipes read from different files.
func (r *Recipe) Values() *Recipe {
	c := *r
	c.Path, c.Lines = "", nil
	return &c
}

// IsSet reports whether the recipe file sets the dotted key (e.g. "model.hidden").
func (r *Recipe) IsSet(key string) bool {
	_, ok := r.Lines[key]
	return ok
}

// KeyError returns "path:line: key: message" (without the line when the file does not set
// key), the form of every error of Load.
func (r *Recipe) KeyError(key, format string, args ...any) error {
	n, msg, key := r.Lines[key], oneLine(fmt.Sprintf(format, args...)), oneLine(key)
	if n > 0 {
		return fmt.Errorf("%s:%d: %s: %s", r.Path, n, key, msg)
	}
	return fmt.Errorf("%s: %s: %s", r.Path, key, msg)
}

// Data is the [data] section: which BEIR collection to read.
type Data struct {
	// Dir is the BEIR directory (corpus.jsonl, queries.jsonl, qrels/),
	// relative to the recipe file. Required; default "".
	Dir string `toml:"dir"`
	// TrainSplit names qrels/<train_split>.tsv, the training judgements.
	// Default "train".
	TrainSplit string `toml:"train_split"`
	// DevSplit names the development judgements (model selection, the
	// reranker's interpolation weight); "" for none. Default "dev".
	DevSplit string `toml:"dev_split"`
	// TestSplit names the held-out judgements; "" for none. Default "test".
	TestSplit string `toml:"test_split"`
	// TitleField makes a passage title + " " + text instead of text alone.
	// Default true.
	TitleField bool `toml:"title_field"`
}

// Tokenizer is the [tokenizer] section: load a tokenizer.json (File) or train
// a WordPiece vocabulary on the training corpus (Train); exactly one of the two.
type Tokenizer struct {
	// File is a tokenizer.json to load, relative to the recipe file; "" to
	// train one instead. Default "".
	File string `toml:"file"`
	// Train trains a WordPiece vocabulary on the corpus. Default false.
	Train bool `toml:"train"`
	// VocabSize is the vocabulary size of a trained tokenizer, special tokens
	// included; >= 100 when training. Default 8000.
	VocabSize int `toml:"vocab_size"`
	// MinFrequency is the fewest occurrences a word piece needs to enter a
	// trained vocabulary; >= 1. Default 2.
	MinFrequency int `toml:"min_frequency"`
	// Lowercase lowercases text before a trained tokenizer splits it.
	// Default true.
	Lowercase bool `toml:"lowercase"`
	// MaxLength is L, the tokens per query or passage including [CLS] and
	// [SEP]; longer texts are truncated; >= 4. For a reranker, L is the length
	// of the [CLS] query [SEP] passage [SEP] pair, the passage cut first.
	// Default 64.
	MaxLength int `toml:"max_length"`
	// QueryMaxLength is the query side's L for a bi-encoder (kind retriever), when queries
	// are much shorter than passages (SciFact claims and abstracts); 0 means max_length;
	// 4 <= query_max_length <= max_length otherwise. Default 0.
	QueryMaxLength int `toml:"query_max_length"`
	// DynamicPadding pads each encoding batch only to its longest text (rounded up to a
	// length bucket), with the texts sorted by length, instead of every text to max_length;
	// the vectors are equal within float32 rounding and long-passage corpora encode several
	// times faster. Default false (the shipped Cranfield and CISI recipes pad to max_length).
	DynamicPadding bool `toml:"dynamic_padding"`
}

// QueryLength is the query side's L: QueryMaxLength, or MaxLength when that is 0.
func (t Tokenizer) QueryLength() int {
	if t.QueryMaxLength > 0 {
		return t.QueryMaxLength
	}
	return t.MaxLength
}

// Model is the [model] section: the encoder architecture.
type Model struct {
	// Encoder is "bow" (mean of token embeddings, then a linear layer) or
	// "transformer". Default "bow".
	Encoder string `toml:"encoder"`
	// Hidden is H, the embedding and output width; >= 1 (a multiple of heads
	// for the transformer). Default 128.
	Hidden int `toml:"hidden"`
	// Pooling turns token states into one vector: "mean" (over unmasked
	// tokens) or "cls" (the [CLS] state). Default "mean".
	Pooling string `toml:"pooling"`
	// SharedTowers makes queries and passages share one encoder. Default true.
	SharedTowers bool `toml:"shared_towers"`
	// Layers is the number of Transformer blocks; >= 1. Default 2.
	Layers int `toml:"layers"`
	// Heads is the number of attention heads; >= 1, divides hidden.
	// Default 4.
	Heads int `toml:"heads"`
	// FFN is the inner width of the feed-forward block; >= 1. Default 512.
	FFN int `toml:"ffn"`
	// Dropout is the dropout probability in training, in [0, 1). Default 0.1.
	Dropout float64 `toml:"dropout"`
	// MaxPosition is the number of learned positions; >= tokenizer.max_length.
	// Default 512.
	MaxPosition int `toml:"max_position"`
	// InitFrom is a directory whose weights initialise the model, relative to
	// the recipe file: a run directory (its latest checkpoint), an export
	// written by `train export`, or a Hugging Face BERT directory with a
	// compatible architecture; "" to start from random weights. Kind reranker
	// also reads an encoder body (a BertModel / sentence-transformers
	// directory): its [model] sizes that the recipe leaves out are the
	// directory's.
	// Default "".
	InitFrom string `toml:"init_from"`
}

// Loss is the [loss] section.
type Loss struct {
	// Name is the training loss, one of those the kind trains (KindSpec.Losses;
	// "infonce" for every kind that reads [loss]). Default "infonce".
	Name string `toml:"name"`
	// Similarity scores a query against a passage: "dot" or "cosine".
	// Default "cosine".
	Similarity string `toml:"similarity"`
	// Temperature is tau in softmax(s / tau); > 0. Default 0.05.
	Temperature float64 `toml:"temperature"`
	// Dims are the embedding prefixes matryoshka_infonce trains (Kusupati et al. 2022), the
	// full dimension first: strictly descending, each >= 1 and at most the model's output
	// dimension (model.hidden, or model.init_from's). Each m below the full dimension is also
	// evaluated as the systems "finetuned@m" / "dense@m" (vectors cut to their first m
	// coordinates, re-normalised for cosine; TREC files runs/<split>.finetuned_d<m>.trec).
	// Read only by matryoshka_infonce, which needs it. Default [].
	Dims []int `toml:"dims"`
	// DimWeights are the weights of the prefixes' InfoNCE terms, one per dim, each > 0; []
	// weighs every prefix 1. Default [].
	DimWeights []float64 `toml:"dim_weights"`
	// Teacher is the cross-encoder a distillation loss (margin_mse, kl_distill) learns from,
	// relative to the recipe file: a reranker run's model directory (<run>/reranker-<loss>, a
	// run checkpoint) or an exported cross-encoder (BertForSequenceClassification layout).
	// Its scores of every training (query, passage) pair are computed before training and
	// cached in <run>/teacher_scores.tsv. Required by, and read only by, the distillation
	// losses. Default "".
	Teacher string `toml:"teacher"`
	// TeacherTemperature is tau_T: kl_distill matches softmax(s / temperature) to
	// softmax(t / teacher_temperature); margin_mse matches the student's margin s+ - s- to the
	// teacher's (t+ - t-) * temperature / teacher_temperature (the two margins in softmax
	// units, so a cosine student can reach a cross-encoder's logits); > 0. Default 1.0.
	TeacherTemperature float64 `toml:"teacher_temperature"`
	// TeacherCache is a teacher_scores.tsv of an earlier run (relative to the recipe file)
	// read before scoring and written back after, so that a rerun with the same teacher scores
	// nothing again; a file of another teacher (its hash differs) is refused. "" uses only the
	// run directory's file. Read only with loss.teacher. Default "".
	TeacherCache string `toml:"teacher_cache"`
	// InfoNCEWeight is w in L = L_distill + w * L_InfoNCE: the weight of an InfoNCE term over
	// the batch's in-batch and hard negatives (the labels) added to a distillation loss
	// (margin_mse, kl_distill), at loss.temperature and loss.similarity, false negatives masked
	// as sampler.false_negatives says. 0 trains the teacher's scores alone. Read only by the
	// distillation losses; finite, >= 0. Default 0.
	InfoNCEWeight float64 `toml:"infonce_weight"`
	// TeacherBM25Weight is beta in t(q, p) = ce(q, p) + beta * bm25(q, p): the teacher of a
	// distillation loss becomes the cross-encoder's logit plus beta times the pair's BM25 score
	// (the run's index, index.k1 and index.b; 0 for a passage sharing no term with the query),
	// a lexical + neural teacher (Wang, Zhuang and Zuccon 2021: BERT-based rankers gain from
	// interpolation with BM25). Choose beta on the dev split (tools/treceval -linear on the
	// teacher run's runs/dev.*.trec). The cache (teacher_scores.tsv) keeps the cross-encoder's
	// scores alone, so changing beta scores nothing again. Read only with loss.teacher; finite,
	// >= 0. Default 0 (the cross-encoder alone).
	TeacherBM25Weight float64 `toml:"teacher_bm25_weight"`
}

// Sampler is the [sampler] section: how training examples are drawn.
type Sampler struct {
	// HardNegatives is the number of mined negatives per query; >= 0 and at
	// most the negative window's size. Default 1.
	HardNegatives int `toml:"hard_negatives"`
	// NegativeSource is the ranking negatives are mined from: "bm25"; "dense", the ranking
	// of the model before training (the model.init_from checkpoint: its own dense top-k);
	// or "bm25+dense", both rankings interleaved (BM25's first, the dense first, BM25's
	// second, ...; a passage already listed is skipped), so the window draws from both.
	// Judged-relevant passages are excluded from every source. Default "bm25".
	// "dense_refresh" mines them from the model being trained (ANCE, Xiong et al. 2021): the
	// corpus is re-encoded and the negatives re-mined every RefreshEvery steps of [train]
	// (through index_refresh, synchronously), so every batch draws from one index version.
	NegativeSource string `toml:"negative_source"`
	// RefreshEvery is the re-mining period in training steps of negative_source =
	// "dense_refresh"; >= 1 there, 0 (unset) otherwise. Default 0.
	RefreshEvery int `toml:"refresh_every"`
	// NegativeMargin, > 0, drops a mined candidate d of example (q, p) when s(q,d) > s(q,p) -
	// NegativeMargin (likely an unlabelled positive); 0 is off. Dense sources only. Default 0.
	NegativeMargin float64 `toml:"negative_margin"`
	// NegativeRelative, in (0, 1], drops a mined candidate when s(q,d) > NegativeRelative ·
	// s(q,p) (NV-Retriever's TopK-PercPos, 0.95 there); 0 is off. Dense sources only. Default 0.
	NegativeRelative float64 `toml:"negative_relative"`
	// NegativeWindow is [first, last], the 1-based inclusive ranks of the
	// source's ranking to mine from; 1 <= first <= last. Default [1, 30].
	NegativeWindow [2]int `toml:"negative_window"`
	// NegativeStrategy is "top" (the best-ranked non-relevant passages of the
	// window) or "random" (uniform within the window). Default "random".
	NegativeStrategy string `toml:"negative_strategy"`
	// FalseNegatives says what happens to an in-batch passage judged relevant to a query
	// other than its own: "mask" keeps the example and removes that passage from the query's
	// softmax (RocketQA-style), "defer" moves the example to a later batch so no batch holds
	// one (fails when the judgements overlap too much to pack batches). Default "mask".
	FalseNegatives string `toml:"false_negatives"`
}

// Pretrain is the [pretrain] section: unsupervised independent cropping
// (Contriever, Izacard et al. 2022) on the corpus before supervised steps.
// Kind reranker reads it as cropping lists (sampler.CropLists): a span of a
// passage is the query, the passage its positive, BM25's hits for the span
// (rerank.pretrain_depth) its negatives; BatchSize is then lists per step.
type Pretrain struct {
	// Steps is the number of cropping steps; 0 turns pretraining off; >= 0.
	// Default 0.
	Steps int `toml:"steps"`
	// BatchSize is B, documents per pretraining batch; >= 2. Default 64.
	BatchSize int `toml:"batch_size"`
	// CropMin is the shortest span, in tokens; >= 1. Default 8.
	CropMin int `toml:"crop_min"`
	// CropMax is the longest span, in tokens; >= crop_min. Default 32.
	CropMax int `toml:"crop_max"`
}

// Train is the [train] section: the supervised optimisation.
type Train struct {
	// Steps is the number of optimiser steps; >= 0. Default 1000.
	Steps int `toml:"steps"`
	// BatchSize is B, queries per batch; >= 2 (in-batch negatives need two).
	// Default 32.
	BatchSize int `toml:"batch_size"`
	// MiniBatchSize, when > 0, trains each batch by gradient caching (GradCache, Gao et al.
	// 2021): the queries and passages are encoded MiniBatchSize rows at a time, the loss is
	// taken over the whole batch, and each chunk is run again to back-propagate its share, so
	// memory follows the chunk and the gradient is the full batch's. Must divide batch_size;
	// kinds retriever and colbert (colbert.CachedTask). 0 (off) trains the batch in one graph.
	// Default 0.
	MiniBatchSize int `toml:"mini_batch_size"`
	// DynamicPadding pads each training batch's queries and passages only to their longest
	// text, rounded up to a multiple of 32 tokens and at most the side's max length
	// (tokenizer.query_max_length, tokenizer.max_length), instead of both sides to their max
	// length; each padded shape (Lq, Lp) gets its own training graph, built once and cached
	// (biencoder.BucketedBiTask: at most 4, holding together no more padded tokens than the one
	// fixed-padding graph). The loss and gradients are fixed padding's within float32 rounding
	// (dropout masks differ, so the numbers are not fixed padding's bit for bit); the same seed
	// gives the same numbers, and a resumed run continues exactly. With mini_batch_size, each
	// chunk is padded to its own bucket instead (biencoder.CachedBiTask.Dynamic: one graph pair per
	// chunk length, at most max_length/32 a side). The train phase only (pretrain pads to the
	// max length); kind retriever, and kind colbert for its passages (colbert.BucketedTask;
	// its queries keep colbert.query_length). Default false (the shipped recipes pad every batch
	// to the max length).
	DynamicPadding bool `toml:"dynamic_padding"`
	// LR is the peak learning rate of AdamW; > 0. Default 0.001.
	LR float64 `toml:"lr"`
	// WeightDecay is AdamW's decoupled weight decay; >= 0. Default 0.01.
	WeightDecay float64 `toml:"weight_decay"`
	// WarmupSteps is the linear warm-up length in steps; >= 0. Default 100.
	WarmupSteps int `toml:"warmup_steps"`
	// Schedule is the decay after warm-up: "linear", "cosine" or "constant".
	// Default "linear".
	Schedule string `toml:"schedule"`
	// GradClip is the largest global gradient norm; 0 turns clipping off;
	// >= 0. Default 1.0.
	GradClip float64 `toml:"grad_clip"`
	// Precision of the model's float32 matrix products in the whole run (training forward and
	// backward, and the run's encoding, scoring and decoding): "float32", or "bf16" (mixed
	// precision: both operands of each product rounded to bfloat16, float32 accumulation;
	// weights, gradients, optimizer state, softmax, norms and losses stay float32; model.BFloat16
	// has the rounding and the kernels: VDPBF16PS on CPUs with AVX512-BF16, else the float32
	// kernel on the rounded operands, the same bits). Checkpoints stay float32. Default
	// "float32".
	Precision string `toml:"precision"`
	// LogEvery is the steps between log lines; >= 1. Default 50.
	LogEvery int `toml:"log_every"`
	// CheckpointEvery is the steps between checkpoints; 0 saves only at the
	// end; >= 0. Default 500.
	CheckpointEvery int `toml:"checkpoint_every"`
	// EvalEvery, when > 0, evaluates the model on data.dev_split every EvalEvery train steps
	// (and at the last step) with eval.select_metric, which it needs, instead of at every
	// checkpoint: the best evaluation is kept in <run>/best/ and used for the test evaluation
	// and export, each evaluation is a line of log.jsonl and a checkpoint (the resume point;
	// the run directory keeps it, the one before it and best/), and the curve is drawn in
	// <run>/training_curve.png. Kind retriever. 0 (off) evaluates at the train checkpoints when
	// eval.select_metric is set, as before. >= 0. Default 0.
	EvalEvery int `toml:"eval_every"`
	// Patience, when > 0, stops the train phase after that many dev evaluations in a row
	// without a gain of eval.select_metric over the best so far (early stopping; needs
	// eval_every); metrics.json then holds "train/stopped_early_at". 0 never stops. >= 0.
	// Default 0.
	Patience int `toml:"patience"`
}

// Index is the [index] section: BM25 (Lucene's formula).
type Index struct {
	// K1 is BM25's term-frequency saturation; >= 0. Default 1.2.
	K1 float64 `toml:"k1"`
	// B is BM25's length normalisation, in [0, 1]. Default 0.75.
	B float64 `toml:"b"`
	// StreamAbove (kind retriever) streams a corpus of more than this many passages (non-blank
	// lines of corpus.jsonl) instead of loading it: bounded memory, the same rankings. 0 (the
	// default) never streams.
	StreamAbove int `toml:"stream_above"`
	// ANNThreshold (kind retriever) searches a corpus of at least this many passages with an
	// HNSW graph (index/ann) instead of exact search (index.Flat): the dense evaluation, the
	// dense ranking hard negatives are mined from (sampler.negative_source "dense" and
	// "dense_refresh") and checkpoint selection. A streamed corpus (StreamAbove), of which only
	// the dense evaluation ranks with the model, is read back from its embedding shards into
	// the graph, in memory (4·N·H bytes of vectors, 8·N·H while building). The rankings are
	// then approximate; the output and metrics.json ("dense/hnsw_passages") say so. 0 (the
	// default) always searches exactly. >= 0.
	ANNThreshold int `toml:"ann_threshold"`
	// ANNM is HNSW's M: links per node on layers >= 1, 2·M on layer 0. In 2..127. Default 16.
	ANNM int `toml:"ann_m"`
	// ANNEfConstruction is HNSW's candidate-list size while building; >= 1. Default 200.
	ANNEfConstruction int `toml:"ann_ef_construction"`
	// ANNEfSearch is HNSW's candidate-list size while searching (max(ann_ef_search, depth)
	// candidates for depth hits); >= 1. Default 64.
	ANNEfSearch int `toml:"ann_ef_search"`
}

// Eval is the [eval] section: what is evaluated and reported.
type Eval struct {
	// Splits are the qrels splits evaluated. Default ["test"].
	Splits []string `toml:"splits"`
	// Systems are the rankings compared: "bm25", "dense", "rrf" (reciprocal
	// rank fusion of bm25 and dense) and "rerank" (the first stage reranked);
	// for a retriever also "zeroshot" (the model.init_from model before training)
	// and "finetuned" (the trained model: "dense" under the name that says so).
	// Default ["bm25", "dense", "rrf"].
	Systems []string `toml:"systems"`
	// RRFK is k in RRF's 1 / (k + rank) (Cormack et al. 2009); >= 1.
	// Default 60.
	RRFK int `toml:"rrf_k"`
	// Depth is the hits retrieved per query; >= 1 and >= every metric's
	// cutoff. Default 1000.
	Depth int `toml:"depth"`
	// Metrics are reported as "<name>" or "<name>@<k>" with name one of
	// nDCG, MRR, Recall, P, MAP. Default ["nDCG@10", "MRR@10",
	// "Recall@100", "Recall@1000", "MAP", "P@10"].
	Metrics []string `toml:"metrics"`
	// SelectMetric, when set (e.g. "nDCG@10", one of metrics), chooses the retriever's
	// checkpoint on data.dev_split: at every train checkpoint (train.checkpoint_every, or every
	// train.eval_every steps when set, and the last step) the passages are encoded and the dev
	// queries ranked; the checkpoint with the
	// highest value is kept in <run>/best/ and evaluated on the eval splits as "finetuned"
	// (and "dense"). "" evaluates the last step. Default "".
	SelectMetric string `toml:"select_metric"`
	// DevCorpusSample, when > 0, ranks the dev queries of model selection against a sample of
	// the corpus instead of all of it: every passage the dev qrels judge, plus this many others
	// drawn with the recipe's seed (all of them when fewer remain). The dev numbers are then
	// not comparable with a full ranking's; metrics.json says so ("select/dev_corpus_passages")
	// and so does the output. The final evaluation always ranks the whole corpus. Kind
	// retriever, with eval.select_metric. 0 (off) ranks the whole corpus. >= 0. Default 0.
	DevCorpusSample int `toml:"dev_corpus_sample"`
}

// Defaults returns a recipe holding every key's default. It is not valid on
// its own: data.dir is required and the tokenizer needs file or train. Each
// call returns fresh slices.
func Defaults() *Recipe {
	return &Recipe{
		Kind:      "retriever",
		Seed:      42,
		OutputDir: "runs",
		World:     garden.DefaultConfig(),
		Reader:    defaultReader(),
		RAG:       defaultRAG(),

		Realm:        defaultRealm(),
		IndexRefresh: defaultIndexRefresh(),
		Data: Data{
			TrainSplit: "train",
			DevSplit:   "dev",
			TestSplit:  "test",
			TitleField: true,
		},
		Tokenizer: Tokenizer{
			VocabSize:    8000,
			MinFrequency: 2,
			Lowercase:    true,
			MaxLength:    64,
		},
		Model: Model{
			Encoder:      "bow",
			Hidden:       128,
			Pooling:      "mean",
			SharedTowers: true,
			Layers:       2,
			Heads:        4,
			FFN:          512,
			Dropout:      0.1,
			MaxPosition:  512,
		},
		Loss: Loss{
			Name:        "infonce",
			Similarity:  "cosine",
			Temperature: 0.05,

			Dims:               []int{},
			DimWeights:         []float64{},
			TeacherTemperature: 1,
		},
		Sampler: Sampler{
			HardNegatives:    1,
			NegativeSource:   "bm25",
			NegativeWindow:   [2]int{1, 30},
			NegativeStrategy: "random",
			FalseNegatives:   "mask",
		},
		Pretrain: Pretrain{
			Steps:     0,
			BatchSize: 64,
			CropMin:   8,
			CropMax:   32,
		},
		Train: Train{
			Steps:           1000,
			BatchSize:       32,
			LR:              1e-3,
			WeightDecay:     0.01,
			WarmupSteps:     100,
			Schedule:        "linear",
			Precision:       "float32",
			GradClip:        1.0,
			LogEvery:        50,
			CheckpointEvery: 500,
		},
		Index: Index{K1: 1.2, B: 0.75, ANNM: 16, ANNEfConstruction: 200, ANNEfSearch: 64},
		Eval: Eval{
			Splits:  []string{"test"},
			Systems: []string{"bm25", "dense", "rrf"},
			RRFK:    60,
			Depth:   1000,
			Metrics: []string{"nDCG@10", "MRR@10", "Recall@100", "Recall@1000", "MAP", "P@10"},
		},
	}
}
