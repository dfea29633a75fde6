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
// Pretrained-shape workloads (issue 15; SciFactShapes, random weights of the real shapes, nothing
// downloaded; token ids of SciFact texts made by the tokenizer of pretrained/all-MiniLM-L6-v2
// when present, else by a WordPiece vocabulary trained on the corpus, named in the table):
// minilm-train, one all-MiniLM-L6-v2 retriever step (claims at L 32, a judged abstract and a BM25
// hard negative each at L 256, masked InfoNCE, AdamW; B is -minilm-b, the 32 by
// default); minilm-encode and bge-small-encode, 1,024
// abstracts at max length 256 with the dynamic padding of biencoder.Encoder (the peers run the same
// plan, biencoder.DynamicBatches); minilm-cross-train (lists of 8 pairs at L 320, listwise) and
// minilm-cross-score. Their peers: PyTorch 2 from the repository's venv (tools/pyenv/setup.sh),
// eager and with torch.compile, sentence-transformers' own encode() for the encoding workloads,
// and Debian's PyTorch 1.13 when installed; ratios are against the first peer that ran.
//
// The ann workload (issue 17; bench.RunANN, only when named: -only ann) has no peer and runs in
// the bench process: a synthetic collection (package data/synth, -ann-n passages) embedded by a
// seeded random projection of its hashed tf-idf bag of words (BowProjection, 384 dimensions),
// searched exactly with index.Flat (the ground truth and the exact QPS) and with an HNSW graph
// (package index/ann) at each -ann-ef; it prints QPS, CPU per query, recall@10 and recall@100
// against exact, build time and each phase's peak RSS (docs/results/ann.md).
//
// The scale workload (issue 17; bench.RunScale, only when named: -only scale) runs
// recipes/scale-synth.toml with the train command as a child process per corpus size
// (-scale-n), generating the synthetic corpora it lacks, and prints each child's wall time, CPU
// time and peak RSS (getrusage) with the verdict whether each grows at most linearly and the
// largest peak stays within -scale-max-rss-mib (docs/results/scale-synth.md).
//
// A run prints "noisy" instead of PASS or FAIL for its speed targets when other processes
// loaded the machine (Loads.Noisy): the 1-minute load average (/proc/loadavg) above NoisyLoad
// before the bench starts or after its own threads have stopped (it waits up to -settle, 120 s,
// for the average to fall), or above NoisyLoad plus its own threads in any 10-second sample
// while it measures. The value read right at the end is printed but decides nothing: on two
// cores the bench's two threads alone hold it near 2.
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
