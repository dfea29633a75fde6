package testkit

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/sampler"
)

// SamplerHash loads the recipe at path (skipping t when it or its data.dir cannot be read),
// takes the kind's defaults with kind (nil for none), mines BM25 hard negatives as the
// colbert and splade kinds do (experiment.MineSampler over index.BM25 with the recipe's k1, b)
// and returns the sha256 (hex) of its first n batches, each written as JSON: a fingerprint of
// what a recipe's first steps train on.
func SamplerHash(t *testing.T, path string, kind func(*configs.Recipe) *configs.Recipe, n int) string {
	t.Helper()
	rec, err := configs.Load(path)
	if err != nil {
		t.Skip(err)
	}
	if kind != nil {
		rec = kind(rec)
	}
	ds, passages, err := experiment.LoadPassages(rec)
	if err != nil {
		t.Skip(err)
	}
	bm25 := index.NewBM25(ds.Corpus.IDs, passages, index.BM25Params{K1: rec.Index.K1, B: rec.Index.B})
	smp, _, err := experiment.MineSampler(rec, ds, experiment.BM25Rank(bm25), passages, nil, uint64(rec.Seed))
	if err != nil {
		t.Fatal(err)
	}
	return BatchHash(t, smp, n)
}

// BatchHash is the sha256 (hex) of the first n batches of smp, each written as JSON.
func BatchHash(t *testing.T, smp *sampler.Sampler, n int) string {
	t.Helper()
	h := sha256.New()
	for step := range n {
		b, _, err := smp.Batch(step)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.NewEncoder(h).Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
