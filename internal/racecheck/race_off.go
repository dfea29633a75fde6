//go:build !race

package racecheck

// Enabled is false: built without -race (see race_on.go).
const Enabled = false
