// Package biencoder is the dense bi-encoder's training and inference library, shared by the
// retriever kind, the garden kinds (package ragkit), the speed benchmark (package bench), the
// pipeline module and tools: the contrastive training tasks, chosen in one call by New from
// TaskOptions (BiTask, one fixed-shape graph; BucketedBiTask, one graph per padded shape;
// CachedBiTask, gradient caching; BiStep for timing a step), the contrastive loss of a recipe's [loss], the
// encoder configuration of its [model], the dropout streams of the retriever phases, the
// inference Encoder of a tower (fixed or dynamic padding; EncodeTexts), and the exact dense
// Searcher over a corpus. It runs no recipe (package experiment/retriever does) and was
// experiment/dense until issue 36.
//
// Queries and passages have lengths of their own (Lengths): NewBiTask builds each side's
// fixed-shape training graph at its length and SearchOptions.Len cuts each side at search time.
// BucketedBiTask (train.dynamic_padding) trains with one graph per padded shape instead,
// each batch padded to its own length bucket (PaddedLen), the graphs cached within a memory
// bound (BucketOptions). The recipes give both tokenizer.max_length and search with fixed
// padding (SearchOptions.Dynamic false), the numbers they have always had.
package biencoder
