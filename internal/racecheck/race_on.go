//go:build race

package racecheck

// Enabled is true under `go test -race`. The race detector makes the training kernels
// 10-20x slower, so the three longest training runs (RAG joint recall, RePlug recall, Self-RAG end to end), which start no goroutines beyond the
// kernels' parallel loops that every other test also runs, skip themselves under it
// (SkipUnderRace); every test with goroutines of its own (index refresh, scoring workers,
// resume after an interrupt) runs.
const Enabled = true
