package retriever

import (
	"io"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// The shipped retriever recipes that mine BM25 negatives deal, through the run's load stage
// (experiment.MineSampler since issue 36), the first 20 batches they dealt through the
// retriever's own retrieverSampler before (sha256 of the batches as JSON, recorded on main
// ec65d34; skipped without the recipe's dataset).
func TestShippedRecipesSampleAsBefore(t *testing.T) {
	if testing.Short() {
		t.Skip("tokenizer training and BM25 over three corpora")
	}
	for recipe, want := range map[string]string{
		"../../recipes/retriever-cranfield.toml":           "820e5bfbeb11f6fb3db362130920e69dd007526dda06df0b205e65049e466c8a",
		"../../recipes/retriever-cisi.toml":                "12bbcf623331cb0d9357faa51fa7fc150e85a603e84554159987cfcc7ad7c597",
		"../../recipes/scifact-minilm-bm25-negatives.toml": "d6e79bac0e936f83662667ea0e7a169818818b0b43fb6329a3a46b41c9bb8299",
	} {
		if got := loadSamplerHash(t, recipe, 20); got != want {
			t.Errorf("%s: first 20 batches %s, before %s", recipe, got, want)
		}
	}
}

// loadSamplerHash runs the check and load stages of the recipe at path and returns the sha256
// (hex) of the sampler's first n batches, each written as JSON.
func loadSamplerHash(t *testing.T, path string, n int) string {
	t.Helper()
	rec, err := configs.Load(path)
	if err != nil {
		t.Skip(err)
	}
	r := &retrieverRun{rec: rec, o: experiment.Options{Out: io.Discard, Progress: io.Discard}, seed: uint64(rec.Seed)}
	defer r.close()
	if err := r.check(); err != nil {
		t.Fatal(err)
	}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	return testkit.BatchHash(t, r.smp, n)
}
