// Package experiment is the shared base every recipe kind runs on: it owns the run directory
// (the resolved recipe, log.jsonl, checkpoints, runs/<split>.<system>.trec, metrics.json) and
// the steps every kind takes, in the order of the data flow: configs -> data -> tokenize ->
// sampler -> model -> losses -> trainer -> checkpoints, then index and eval.
//
// Run (run.go) looks the recipe's kind up among the registered ones (Register, registry.go) and
// calls it. What a kind builds on: the run directory, its lock and metrics (NewRunDir,
// PrepareRunDir, WriteMetrics, EvaluateSystems, rundir.go), the tokenizer (PrepareTokenizer,
// SaveTokenizer), log.jsonl (OpenRunLog), the one phase runner (Env.RunPhase, phase.go: AdamW
// restored on resume, warm-up, checkpoints through one save function, truncation report), the
// graph helpers (GraphParams, graph.go) and the truncation counts (TruncCount, truncation.go).
//
// Each kind lives in its own package below this one and registers itself in an init
// (retriever, reranker, rag, selfrag, replug, realm; the garden kinds share package ragkit,
// the retriever and the garden kinds package dense); package kinds imports them all. This
// package names no kind, and holds no model, loss or metric of its own; cmd/train only
// parses flags and calls Run.
package experiment
