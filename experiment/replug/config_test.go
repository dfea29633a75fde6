package replug

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	_ "github.com/ragtrain/ragtrain/experiment/realm" // kind realm, which does not read [replug]
)

// TestConfig loads [replug] through the kind's registration and rejects impossible values with
// the file, line and key (these cases were configs' TestRealmSections before [replug] moved
// here).
func TestConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.toml")
	load := func(kind, body string) (*configs.Recipe, error) {
		return testkit.LoadText(t, path, "kind = \""+kind+"\"\n[tokenizer]\ntrain = true\n"+body)
	}
	r, err := load("replug", "[replug]\nsteps = 7\ntowers = \"both\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if p := Of(r); p.Steps != 7 || p.Towers != "both" || p.TauLM != 1 || p.TopK != 8 || len(p.Systems) != 2 {
		t.Errorf("loaded %+v", *p)
	}
	for _, c := range []struct{ kind, body, want string }{
		{"replug", "[replug]\ntowers = \"doc\"\n", `r.toml:5: replug.towers: unknown value "doc"`},
		{"replug", "[replug]\ntop_k = 1\n", `r.toml:5: replug.top_k: must be >= 2, got 1`},
		{"replug", "[replug]\ntau_lm = 0.0\n", `r.toml:5: replug.tau_lm: must be > 0`},
		{"replug", "[replug]\ntowers = \"both\"\n[rag]\ncandidate_source = \"bm25+dense\"\n", `r.toml:5: replug.towers: replug.towers = "both" retrieves from the refreshed dense index`},
		{"replug", "[replug]\nsteps = \"7\"\n", `r.toml:5: replug.steps: wrong type: got a string, want an integer`},
		{"realm", "[replug]\ntowers = \"doc\"\n", `r.toml:4: section [replug] is not read by kind "realm"`},
	} {
		if _, err := load(c.kind, c.body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: err = %v, want %q", c.kind, c.body, err, c.want)
		}
	}
}

// TestDocTable: doc.go documents every [replug] key with its default.
func TestDocTable(t *testing.T) {
	c := defaultConfig()
	testkit.DocTable(t, "replug.", &c)
}
