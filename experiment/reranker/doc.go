// Package reranker is the recipe kind "reranker": cross-encoders trained on a first stage's
// candidates (BM25 or a retriever run's dense run), one per loss of rerank.losses, evaluated
// reranking that first stage and interpolated with it ([rerank]). It registers itself with one
// experiment.Register call (run and recipe sections) in an init.
package reranker
