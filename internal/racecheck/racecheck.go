// Package racecheck tells tests whether the race detector is on (Enabled), so that the longest
// training runs can skip themselves under `go test -race` (SkipUnderRace).
package racecheck

import "testing"

// SkipUnderRace skips a long training run with no goroutines of its own when the race detector
// is on (see Enabled); the run still executes in every plain `go test`.
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("long training run with no goroutines of its own, 10-20x slower under -race; runs without -race")
	}
}
