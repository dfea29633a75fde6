package atlas

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// TestConfig loads [atlas] through the kind's registration and rejects impossible values with
// the file, line and key.
func TestConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.toml")
	load := func(body string) (*configs.Recipe, error) {
		return testkit.LoadText(t, path, "kind = \"atlas\"\n[tokenizer]\ntrain = true\n[model]\nshared_towers = false\n"+body)
	}
	r, err := load("[atlas]\nsystems = [\"supervised\", \"loo_both\"]\ntau_loo = 2.0\n")
	if err != nil {
		t.Fatal(err)
	}
	if a := Of(r); a.TauLOO != 2 || a.TopK != 8 || len(a.Systems) != 2 || a.Systems[1] != "loo_both" {
		t.Errorf("loaded %+v", *a)
	}
	for _, c := range []struct{ body, want string }{
		{"[atlas]\nsystems = [\"loo_all\"]\n", `a.toml:7: atlas.systems: unknown system "loo_all"`},
		{"[atlas]\nsystems = []\n", `a.toml:7: atlas.systems: must name at least one system`},
		{"[atlas]\ntop_k = 8\nbm25_depth = 4\n", `a.toml:8: atlas.bm25_depth: must be >= 8, got 4`},
		{"[atlas]\ntau_lm = 0.0\n", `a.toml:7: atlas.tau_lm: must be > 0`},
		{"[atlas]\nstep = 3\n", `a.toml:7: unknown key "atlas.step" (did you mean "atlas.steps"?)`},
	} {
		if _, err := load(c.body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
	if err := os.WriteFile(path, []byte("kind = \"atlas\"\n[tokenizer]\ntrain = true\n[atlas]\nsteps = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := configs.Load(path); err == nil || !strings.Contains(err.Error(), `a.toml:4: atlas.systems: kind "atlas" trains the query tower alone`) {
		t.Errorf("shared towers: err = %v", err)
	}
	for name, want := range map[string][2]string{"supervised": {"", ""}, "emdr2_query": {"emdr2", "query"}, "perplexity_both": {"perplexity", "both"}} {
		o, tw, ok := System(name)
		if !ok || o != want[0] || tw != want[1] {
			t.Errorf("System(%q) = %q, %q, %v", name, o, tw, ok)
		}
	}
	if _, _, ok := System("loo_all"); ok {
		t.Error(`System("loo_all") ok`)
	}
}

// TestDocTable: doc.go documents every [atlas] key with its default.
func TestDocTable(t *testing.T) {
	c := defaultConfig()
	testkit.DocTable(t, "atlas.", &c)
}
