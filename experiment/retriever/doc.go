// Package retriever is the recipe kind "retriever": a bi-encoder warmed up without labels
// ([pretrain]), trained by InfoNCE on mined negatives ([sampler], [train]) and evaluated against
// BM25 and their fusion ([eval]). It registers itself with one experiment.Register call (run and
// recipe sections) in an init; import package kinds to have every kind registered.
package retriever
