package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The kinds this package's tests load, registered as the kind packages under experiment
// register the real ones (configs cannot import experiment).
func init() {
	garden := []string{"world", "tokenizer", "reader", "model", "loss", "pretrain", "train", "index", "rag"}
	RegisterKind("retriever", KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "pretrain", "train", "index", "eval"},
		Losses:   []string{"infonce"},
		Keys: []string{"train.mini_batch_size", "train.dynamic_padding", "train.eval_every", "train.patience",
			"eval.dev_corpus_sample", "index.stream_above", "index.ann_threshold", DenseRefreshKey},
		Check: WarmupWithinSteps,
	})
	RegisterKind("reranker", KindSpec{
		Sections: []string{"data", "tokenizer", "model", "pretrain", "train", "index", "eval", "rerank"},
		Losses:   []string{"pairwise", "listwise", "pointwise"},
		Own: []Section{NewSection("rerank", func() testRerank {
			return testRerank{FirstStage: "bm25", Candidates: 100, ListSize: 8, Losses: []string{"pairwise", "listwise", "pointwise"}, Interpolate: true}
		}, nil)},
	})
	RegisterKind("rag", KindSpec{Sections: garden, Losses: []string{"infonce"}})
	RegisterKind("selfrag", KindSpec{
		Sections: []string{"world", "tokenizer", "reader", "model", "loss", "train", "index", "selfrag"},
		Losses:   []string{"infonce"},
		Own:      []Section{NewSection("selfrag", func() testSelfRAG { return testSelfRAG{TopK: 3, Threshold: 0.5} }, nil)},
	})
	RegisterKind("replug", KindSpec{Sections: append(garden[:len(garden):len(garden)], "realm", "index_refresh"), Losses: []string{"infonce"}})
	RegisterKind("realm", KindSpec{Sections: append(garden[:len(garden):len(garden)], "realm", "index_refresh"), Losses: []string{"infonce"}, Keys: []string{"realm.systems"}})
}

// testRerank stands in for some of the [rerank] section that experiment/reranker owns.
type testRerank struct {
	FirstStage             string   `toml:"first_stage"`
	Candidates             int      `toml:"candidates"`
	ListSize               int      `toml:"list_size"`
	Losses                 []string `toml:"losses"`
	DropAboveFirstPositive bool     `toml:"drop_above_first_positive"`
	Interpolate            bool     `toml:"interpolate"`
}

// testSelfRAG stands in for the [selfrag] section that experiment/selfrag owns.
type testSelfRAG struct {
	TopK      int     `toml:"top_k"`
	Threshold float64 `toml:"threshold"`
}

func TestRegisterKindPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"duplicate":       func() { RegisterKind("retriever", KindSpec{}) },
		"empty name":      func() { RegisterKind("", KindSpec{}) },
		"unknown section": func() { RegisterKind("gan-test", KindSpec{Sections: []string{"trian"}}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: RegisterKind did not panic", name)
				}
			}()
			f()
		}()
	}
	if _, ok := LookupKind("gan-test"); ok {
		t.Error("a kind that panicked at registration is registered")
	}
}

// TestKindSections: a section the kind does not read, and a loss it cannot
// train, are errors naming the line; an unregistered kind lists the registered.
func TestKindSections(t *testing.T) {
	dir := fixture(t)
	for _, c := range []struct{ name, text, want string }{
		{"selfrag in a retriever", "kind = \"retriever\"\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n\n[selfrag]\ntop_k = 3\n",
			`:7: section [selfrag] is not read by kind "retriever" (it reads: data, tokenizer, model, loss, sampler, pretrain, train, index, eval)`},
		{"rerank in a retriever", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[rerank]\ncandidates = 10\n[selfrag]\ntop_k = 3\n",
			`:5: section [rerank] is not read by kind "retriever"`},
		{"dotted key of a foreign section", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[train]\nsteps = 3\n[world]\nseed = 2\n",
			`:7: section [world] is not read by kind "retriever"`},
		{"loss in a reranker", "kind = \"reranker\"\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[loss]\ntemperature = 0.1\n",
			`:6: section [loss] is not read by kind "reranker"`},
		{"pointwise retriever", "kind = \"retriever\"\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[loss]\nname = \"pointwise\"\n",
			`:7: loss.name: kind "retriever" cannot train "pointwise" (valid: "infonce")`},
		{"unknown loss", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[loss]\nname = \"hinge\"\n",
			`:6: loss.name: kind "retriever" cannot train "hinge" (valid: "infonce")`},
		{"unregistered kind", "kind = \"gan\"\n",
			`:1: kind: unknown value "gan", want one of "rag", "realm", "replug", "reranker", "retriever" or "selfrag" (the registered kinds)`},
		{"hard negatives beyond the window", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[sampler]\nhard_negatives = 50\nnegative_window = [1, 30]\n",
			`:6: sampler.hard_negatives: sampler.hard_negatives = 50 exceeds the 30 ranks of sampler.negative_window = [1, 30]`},
		{"window narrower than the negatives", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[sampler]\nnegative_window = [5, 5]\nhard_negatives = 2\n",
			`:7: sampler.hard_negatives: sampler.hard_negatives = 2 exceeds the 1 ranks of sampler.negative_window = [5, 5]`},
	} {
		path := filepath.Join(dir, "r.toml")
		writeRecipe(t, path, c.text)
		_, err := Load(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+c.want) {
			t.Errorf("%s:\n got %v\nwant %s%s...", c.name, err, path, c.want)
		}
	}
	// A window exactly as wide as the negatives is feasible.
	path := filepath.Join(dir, "ok.toml")
	writeRecipe(t, path, "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n[sampler]\nhard_negatives = 30\nnegative_window = [1, 30]\n")
	if _, err := Load(path); err != nil {
		t.Errorf("hard_negatives = window size: %v", err)
	}
}

// TestResolvedWritesTheKindsSections: the resolved recipe holds only the sections
// the kind reads, and a resolved file written before that (every section, the
// foreign ones at their defaults) still loads, so old run directories resume.
func TestResolvedWritesTheKindsSections(t *testing.T) {
	dir := fixture(t)
	path := filepath.Join(dir, "r.toml")
	writeRecipe(t, path, "kind = \"reranker\"\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n")
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	text, err := r.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	lines := keyLines(string(text))
	spec, _ := LookupKind("reranker")
	for _, s := range SectionNames() {
		_, written := lines[s]
		if want := strings.Contains(","+strings.Join(spec.Sections, ",")+",", ","+s+","); written != want {
			t.Errorf("section [%s]: written %v, want %v", s, written, want)
		}
	}
	// An old resolved file: every section written.
	var all strings.Builder
	kindsMu.Lock()
	saved := kindSpecs["reranker"]
	delete(kindSpecs, "reranker")
	kindsMu.Unlock()
	old, err := r.Resolved()
	kindsMu.Lock()
	kindSpecs["reranker"] = saved
	kindsMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	all.Write(old)
	if !strings.Contains(all.String(), "[selfrag]") {
		t.Fatal("the unregistered kind's resolved text lacks [selfrag]")
	}
	oldPath := filepath.Join(dir, "old.resolved.toml")
	if err := os.WriteFile(oldPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(oldPath); err != nil {
		t.Errorf("an old resolved recipe (every section, defaults) does not load: %v", err)
	}
	// Without the header, or with a foreign section changed, it is refused.
	changed := strings.Replace(all.String(), "[selfrag]\n", "[selfrag]\ntop_k = 7\n", 1)
	changed = strings.Replace(changed, "\ntop_k = 3\n", "\n", 1)
	if err := os.WriteFile(oldPath, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(oldPath); err == nil || !strings.Contains(err.Error(), "section [selfrag] is not read") {
		t.Errorf("an old resolved recipe with a non-default foreign section: err = %v", err)
	}
}

// TestDecodeSection: a package that cannot import the kind reads keys of its section by name:
// the file's values, the defaults of a nil recipe, the shared sections alike; an unknown
// section is an error naming it.
func TestDecodeSection(t *testing.T) {
	dir := fixture(t)
	path := filepath.Join(dir, "s.toml")
	writeRecipe(t, path, "kind = \"selfrag\"\n[tokenizer]\ntrain = true\n[index]\nk1 = 0.9\n[selfrag]\ntop_k = 5\n")
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var dec struct {
		TopK      int     `toml:"top_k"`
		Threshold float64 `toml:"threshold"`
	}
	if err := DecodeSection(r, "selfrag", &dec); err != nil || dec.TopK != 5 || dec.Threshold != 0.5 {
		t.Errorf("recipe: %+v, %v; want top_k 5, threshold 0.5", dec, err)
	}
	dec.TopK = 0
	if err := DecodeSection(nil, "selfrag", &dec); err != nil || dec.TopK != 3 {
		t.Errorf("nil recipe: %+v, %v; want the defaults' top_k 3", dec, err)
	}
	var bm25 struct {
		K1 float64 `toml:"k1"`
	}
	if err := DecodeSection(r, "index", &bm25); err != nil || bm25.K1 != 0.9 {
		t.Errorf("shared [index]: %+v, %v; want k1 0.9", bm25, err)
	}
	if err := DecodeSection(r, "selfrg", &dec); err == nil || !strings.Contains(err.Error(), "no section [selfrg]") {
		t.Errorf("unknown section: err = %v", err)
	}
}
