package colbert

import (
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/losses"
)

// The shipped ColBERT recipes, which leave sampler.false_negatives out, sample the first 20
// batches they sampled before the kind read the key (sha256 of the batches as JSON, recorded
// on main e40a7b2 from its bm25Sampler; skipped without datasets/scifact).
func TestShippedRecipesSampleAsBefore(t *testing.T) {
	for recipe, want := range map[string]string{
		"../../recipes/scifact-minilm-colbert.toml":       "db6a73f4010354282079c01695b48634ba76b333704e1276c35f1d284b4632d3",
		"../../recipes/scifact-minilm-colbert-small.toml": "c3e0891d2f0c2d2e6ad1e24d8d617d62ecbb8d02afce9ffec31c2ccf79edafd9",
	} {
		if got := testkit.SamplerHash(t, recipe, withDefaults, 20); got != want {
			t.Errorf("%s: first 20 batches %s, before %s", recipe, got, want)
		}
	}
}

// sampler.false_negatives = "mask" reaches the loss: the mined sampler lets false negatives in
// and the task's batches carry the sampler's mask; left out, the kind defers them (no mask, no
// batch with a false negative).
func TestFalseNegativesKey(t *testing.T) {
	for _, key := range []string{"", "mask", "defer"} {
		keys := ""
		if key != "" {
			keys = `false_negatives = "` + key + `"`
		}
		rec := tinyRecipe(t, "colbert_contrastive", keys)
		r := &colbertRun{rec: rec, c: Of(rec), seed: uint64(rec.Seed)}
		r.loss, _ = losses.Lookup(rec.Loss.Name)
		r.rec = withDefaults(r.rec)
		ds, passages, err := experiment.LoadPassages(r.rec)
		if err != nil {
			t.Fatal(err)
		}
		smp, _, err := experiment.MineSampler(r.rec, ds, experiment.BM25Rank(index.NewBM25(ds.Corpus.IDs, passages, index.BM25Params{K1: 1.2, B: 0.75})), passages, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.smp = smp
		loss, next := r.batches(nil)
		if loss.Masked != (key == "mask") {
			t.Fatalf("key %q: Loss.Masked %v", key, loss.Masked)
		}
		zeros := 0
		for step := range smp.BatchesPerEpoch() {
			b, err := next(step)
			if err != nil {
				t.Fatal(err)
			}
			if (b.Mask != nil) != loss.Masked || (b.Mask != nil && len(b.Mask) != len(b.Queries)*len(b.Passages)) {
				t.Fatalf("key %q: step %d: mask of %d values for %d x %d", key, step, len(b.Mask), len(b.Queries), len(b.Passages))
			}
			zeros += len(b.Mask) - int(sum(b.Mask))
		}
		if want := key == "mask"; (zeros > 0) != want {
			t.Errorf("key %q: %d masked candidates over an epoch", key, zeros)
		}
	}
}

func sum(v []float32) (s float32) {
	for _, x := range v {
		s += x
	}
	return s
}
