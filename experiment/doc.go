// Package experiment runs one recipe end to end: it owns the run directory (the resolved
// recipe, log.jsonl, checkpoints, runs/<split>.<system>.trec, metrics.json) and wires the
// packages together for each recipe kind, in the order of the data flow: configs -> data ->
// tokenize -> sampler -> model -> losses -> trainer -> checkpoints, then index and eval.
//
// It holds no model, loss or metric of its own; cmd/train only parses flags and calls Run.
package experiment
