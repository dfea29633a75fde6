package splade_test

import (
	"testing"

	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// The shipped SPLADE recipe samples the first 20 batches it sampled before its mining moved to
// experiment.MineSampler (sha256 of the batches as JSON, recorded on main e40a7b2 from its
// mineBM25; skipped without datasets/scifact).
func TestShippedRecipeSamplesAsBefore(t *testing.T) {
	const want = "d6e79bac0e936f83662667ea0e7a169818818b0b43fb6329a3a46b41c9bb8299"
	if got := testkit.SamplerHash(t, "../../recipes/scifact-minilm-splade.toml", nil, 20); got != want {
		t.Errorf("first 20 batches %s, before %s", got, want)
	}
}
