package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ragRecipe is a minimal kind = "rag" recipe; extra is appended.
func ragRecipe(extra string) string {
	return "kind = \"rag\"\n[tokenizer]\ntrain = true\n" + extra
}

func TestRAGRecipeLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rag.toml")
	writeRecipe(t, path, ragRecipe(`[world]
gardeners = 120
biographies = 3000
[reader]
pretrain_passes = 2
[rag]
objectives = ["token"]
candidate_source = "bm25+dense"
`))
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Data.Dir != "" || r.World.Gardeners != 120 || r.World.Biographies != 3000 || r.World.News != 24000 ||
		r.Reader.PretrainPasses != 2 || r.Reader.Hidden != 128 || len(r.RAG.Objectives) != 1 || r.RAG.TopK != 4 {
		t.Errorf("loaded %+v %+v %+v", r.World, r.Reader, r.RAG)
	}
	// The resolved recipe loads back to the same values.
	out := filepath.Join(t.TempDir(), "recipe.resolved.toml")
	if err := r.WriteResolved(out); err != nil {
		t.Fatal(err)
	}
	r2, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	r2.Name = r.Name
	if r2.World != r.World || r2.Reader != r.Reader || r2.RAG.TopK != r.RAG.TopK || strings.Join(r2.RAG.Objectives, ",") != "token" {
		t.Errorf("round trip: %+v %+v", r2.World, r2.Reader)
	}
}

// TestRAGRecipeErrors: impossible world, reader and rag values fail naming the file, the line
// and the key.
func TestRAGRecipeErrors(t *testing.T) {
	cases := []struct {
		name, extra, want string
	}{
		{"coverage above 1", "[world]\ncoverage = 1.5\n", "rag.toml:5: world.coverage: must be in [0, 1], got 1.5"},
		{"zero gardeners", "[world]\nnews = 10\ngardeners = 0\n", "rag.toml:6: world.gardeners: must be >= 2, got 0"},
		{"zipf exponent zero", "[world]\nzipf_exponent = 0.0\n", "rag.toml:5: world.zipf_exponent: must be a finite number > 0, got 0"},
		{"zipf exponent negative", "[world]\nzipf_exponent = -1.0\n", "rag.toml:5: world.zipf_exponent: must be a finite number > 0"},
		{"datastore news above news", "[world]\nnews = 10\ndatastore_news = 20\n", "rag.toml:6: world.datastore_news: must be <= world.news = 10, got 20"},
		{"unknown world key", "[world]\ngardners = 10\n", `rag.toml:5: unknown key "world.gardners" (did you mean "world.gardeners"?)`},
		{"reader heads", "[reader]\nheads = 3\n", "rag.toml:5: reader.heads: reader.hidden = 128 is not a multiple of reader.heads = 3"},
		{"reader max_length", "[reader]\nmax_length = 4\n", "rag.toml:5: reader.max_length: must be >= 8, got 4"},
		{"closed book fraction", "[reader]\nclosed_book_fraction = 2.0\n", "rag.toml:5: reader.closed_book_fraction: must be in [0, 1], got 2"},
		{"objective", "[rag]\nobjectives = [\"seq\"]\n", `rag.toml:5: rag.objectives: unknown value "seq", want one of "sequence" or "token"`},
		{"no objective", "[rag]\nobjectives = []\n", "rag.toml:5: rag.objectives: must name at least one"},
		{"full mass with token", "[rag]\ncandidate_mass = \"full\"\n", `rag.toml:5: rag.candidate_mass: rag.candidate_mass = "full" is implemented for the "sequence" objective only`},
		{"bm25 depth", "[rag]\ncandidate_source = \"bm25+dense\"\nbm25_depth = 2\n", "rag.toml:6: rag.bm25_depth: rag.bm25_depth = 2 is below rag.top_k = 4"},
		{"chunking", "[rag]\nchunking = \"page\"\n", `rag.toml:5: rag.chunking: unknown value "page"`},
		{"data.dir", "[data]\ndir = \"x\"\n", `rag.toml:4: section [data] is not read by kind "rag" (it reads: world, tokenizer`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rag.toml")
			writeRecipe(t, path, ragRecipe(c.extra))
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestShippedRAGRecipe loads recipes/rag-garden.toml.
func TestShippedRAGRecipe(t *testing.T) {
	const path = "../recipes/rag-garden.toml"
	if _, err := os.Stat(path); err != nil {
		t.Skip("recipes/rag-garden.toml not there yet")
	}
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != "rag" || r.Name != "rag-garden" {
		t.Errorf("kind %q name %q", r.Kind, r.Name)
	}
}
