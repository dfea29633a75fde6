// Package fusion is the recipe kind "fusion" (issue 41): the garden reader meeting the evidence
// in its input (in-context RAG over BM25's top entry; Fusion-in-Decoder and in-context RAG over
// BM25's top k entries, fid.go), in its middle (a RETRO-style model's chunked cross-attention
// over BM25 neighbours, retro.go) and at its output (the kNN-LM of package knnlm over a datastore
// of the reader's own keys), compared closed-book by popularity bucket, by held-out perplexity
// per λ and after a knowledge update without training (fusion.go lists the stages; its own
// recipe tables are [knnlm], config.go, [fid], fid.go, and [retro], retro.go).
// It registers itself with one experiment.Register call in an init.
package fusion
