package selfrag

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
)

// TestConfig loads [selfrag] through the kind's registration and rejects impossible values with
// the file, line and key; export reads the decoding policy off the same section by key name.
func TestConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.toml")
	load := func(body string) (*configs.Recipe, error) {
		return testkit.LoadText(t, path, "kind = \"selfrag\"\n[tokenizer]\ntrain = true\n"+body)
	}
	r, err := load("[selfrag]\ntop_k = 5\nsupport_weight = 2.5\n")
	if err != nil {
		t.Fatal(err)
	}
	if c := Of(r); c.TopK != 5 || c.SupportWeight != 2.5 || c.RowLength != 48 || c.FinetuneSteps != 800 {
		t.Errorf("loaded %+v", *c)
	}
	var dec export.SelfRAGDecoding
	if err := configs.DecodeSection(r, "selfrag", &dec); err != nil {
		t.Fatal(err)
	}
	if want := (export.SelfRAGDecoding{RowLength: 48, TopK: 5, RetrieveThreshold: 0.5, RelevanceThreshold: 0.5, SupportWeight: 2.5}); dec != want {
		t.Errorf("decoding %+v, want %+v", dec, want)
	}
	for _, c := range []struct{ body, want string }{
		{"[reader]\nmax_length = 32\n[selfrag]\nrow_length = 40\n", `s.toml:7: selfrag.row_length: selfrag.row_length = 40 exceeds reader.max_length = 32`},
		{"[selfrag]\nrename_surnames = \"random\"\n", `s.toml:5: selfrag.rename_surnames: unknown value "random"`},
		{"[selfrag]\nirrelevant_fraction = 1.5\n", `s.toml:5: selfrag.irrelevant_fraction: must be in [0, 1]`},
		{"[selfrag]\ntopk = 3\n", `s.toml:5: unknown key "selfrag.topk" (did you mean "selfrag.top_k"?)`},
	} {
		if _, err := load(c.body); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
}

// TestDocTable: doc.go documents every [selfrag] key with its default.
func TestDocTable(t *testing.T) {
	c := defaultConfig()
	testkit.DocTable(t, "selfrag.", &c)
}
