// Package experiment runs one recipe end to end: it owns the run directory (the resolved
// recipe, log.jsonl, checkpoints, runs/<split>.<system>.trec, metrics.json) and wires the
// packages together for each recipe kind, in the order of the data flow: configs -> data ->
// tokenize -> sampler -> model -> losses -> trainer -> checkpoints, then index and eval.
//
// The shared base: Run (run.go) looks the recipe's kind up among the registered ones
// (Register, registry.go) and calls it; every kind trains through one phase runner
// (runEnv.runPhase, phase.go: AdamW restored on resume, warm-up, checkpoints through one save
// function, truncation report). Each kind registers itself from its own file (retriever.go,
// reranker.go, rag.go, replug.go, realm.go, selfrag.go), so Run names no kind.
//
// It holds no model, loss or metric of its own; cmd/train only parses flags and calls Run.
package experiment
