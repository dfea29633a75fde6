// Package bench times this project against PyTorch and Lucene 4.10 on the same machine, inputs
// and threads, side by side (issue 8), and is run by cmd/bench:
//
//	go run ./cmd/bench
//
// Workloads (Workloads; shapes in DefaultShapes, those of the recipes): one retriever training
// step (forward, InfoNCE, backward, clipping, AdamW) of the Transformer (H = 128, 2 layers, 4
// heads, FFN 512, B = 32 queries + 32 positives + 32 hard negatives, L = 64, V = 8000) and of
// the bow encoder; passage encoding; a cross-encoder training step (8 lists of 8 pairs, L = 128,
// listwise) and scoring; a reader language-model step (causal, B = 64, L = 32, V = 2000); BM25
// indexing of Cranfield and its 225 queries to depth 1000.
//
// How it measures: Prepare turns Cranfield into token ids once (data.json, corpus.tsv,
// queries.tsv) and every side reads those files. Each system runs as its own worker process
// (our worker is this program again, the peers bench/pytorch/peer.py and
// bench/lucene/LuceneBench.java, embedded in the binary) speaking the line protocol of
// protocol.go; the orchestrator alternates their runs, so load from other processes falls on
// all sides alike, and reports the median time measured inside each worker, the throughput,
// our throughput over the peer's, the matrix-product GFLOP/s and each process's peak resident
// memory (VmHWM). Our OpenBLAS build (go build -tags openblas) runs beside the default one when
// it builds.
//
// Not for: correctness of the models (their packages test that); the bench installs nothing and
// skips, with a message naming the Debian package, any peer that is missing.
package bench
