package ragkit

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ragtrain/ragtrain/data/garden"
)

func TestCounterfactual(t *testing.T) {
	values := []string{"Kelso", "Larkhill", "Brindle"}
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		p, a := Counterfactual("Ada Besa lives in Kelso . Ada Besa grows fig .", "Kelso", values, rng)
		if a == "Kelso" || !slices.Contains(values, a) {
			t.Fatalf("seed %d: answer %q, want another town", seed, a)
		}
		if want := "Ada Besa lives in " + a + " . Ada Besa grows fig ."; p != want {
			t.Errorf("seed %d: passage %q, want %q", seed, p, want)
		}
	}
	// A passage that does not state the value is left alone.
	rng := rand.New(rand.NewPCG(1, 1))
	if p, a := Counterfactual("Ada Besa grows fig .", "Kelso", values, rng); p != "Ada Besa grows fig ." || a != "Kelso" {
		t.Errorf("passage without the value: %q, %q", p, a)
	}
}

func TestWorldVariantsDiffer(t *testing.T) {
	cfg := garden.DefaultConfig()
	cfg.Gardeners, cfg.Biographies, cfg.News, cfg.DatastoreNews = 40, 300, 300, 50
	cfg.UpdatedFraction, cfg.PoisonedFraction = 0.25, 0.25
	w, err := garden.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeWorldVariants(w, dir, 1); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	if err := w.Write(base); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"world-updated", "world-poisoned"} {
		a, err := os.ReadFile(filepath.Join(base, "datastore", "entry", "corpus.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, v, "datastore", "entry", "corpus.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) == string(b) {
			t.Errorf("%s: the datastore equals the original world's", v)
		}
	}
	cfg.UpdatedFraction, cfg.PoisonedFraction = 0, 0
	w.Config = cfg
	none := t.TempDir()
	if err := writeWorldVariants(w, none, 1); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(none); len(entries) != 0 {
		t.Errorf("fractions 0 wrote %v", entries)
	}
}
