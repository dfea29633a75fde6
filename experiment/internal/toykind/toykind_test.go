// Package toykind is a recipe kind written for a test: one package and one registration
// (experiment.Register with its run and its own [toy] section) and nothing else, no line in
// configs, experiment or experiment/kinds (issue 36). The test loads recipes of it through
// configs.Load, whose errors name the file, line and key of the kind's own section as they do
// for the shared ones, and runs one through experiment.Run.
package toykind_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
)

// toy is the [toy] section: how many times the run counts, and by how much.
type toy struct {
	// Steps is the counts; >= 1. Default 3.
	Steps int `toml:"steps"`
	// Scale multiplies each count; > 0. Default 0.5.
	Scale float64 `toml:"scale"`
	// Words are logged; each distinct. Default ["a", "b"].
	Words []string `toml:"words"`
}

func init() {
	experiment.Register("toy", runToy, configs.KindSpec{
		Sections: []string{"tokenizer", "train"},
		Own: []configs.Section{configs.NewSection("toy",
			func() toy { return toy{Steps: 3, Scale: 0.5, Words: []string{"a", "b"}} },
			func(c *configs.Checker, r *configs.Recipe, t *toy) {
				configs.AtLeast(c, "toy.steps", t.Steps, 1)
				c.Positive("toy.scale", t.Scale)
				c.Distinct("toy.words", t.Words)
				if t.Steps > r.Train.Steps {
					c.Fail(c.SetOf("toy.steps", "train.steps"), "toy.steps = %d exceeds train.steps = %d", t.Steps, r.Train.Steps)
				}
			})},
	})
}

// runToy writes metrics.json: toy/sum = scale * (1 + ... + steps).
func runToy(_ context.Context, rec *configs.Recipe, o experiment.Options) (string, error) {
	t := configs.SectionOf[toy](rec, "toy")
	dir, err := experiment.PrepareRunDir(rec, o)
	if err != nil {
		return "", err
	}
	sum := 0.0
	for i := 1; i <= t.Steps; i++ {
		sum += t.Scale * float64(i)
	}
	return dir, experiment.WriteMetrics(dir, map[string]float64{"toy/sum": sum, "toy/words": float64(len(t.Words))})
}

func write(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "toy.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const head = "kind = \"toy\"\noutput_dir = \"out\"\n[tokenizer]\ntrain = true\n"

func TestToyKindLoadsAndRuns(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, head+"[toy]\nsteps = 4\nscale = 2.0\n")
	rec, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := configs.SectionOf[toy](rec, "toy")
	if want := (toy{Steps: 4, Scale: 2, Words: []string{"a", "b"}}); !reflect.DeepEqual(*got, want) {
		t.Errorf("[toy] = %+v, want %+v (the file's keys over the registration's defaults)", *got, want)
	}
	run, err := experiment.Run(context.Background(), rec, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(run)
	if err != nil {
		t.Fatal(err)
	}
	if m["toy/sum"] != 20 || m["toy/words"] != 2 { // 2 * (1+2+3+4)
		t.Errorf("metrics %v, want toy/sum 20 and toy/words 2", m)
	}
	// The run directory's resolved recipe holds [toy] and loads back to the same recipe (what
	// -resume reads).
	resolved := filepath.Join(run, experiment.ResolvedRecipeFile)
	text, err := os.ReadFile(resolved)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "[toy]\nsteps = 4\nscale = 2.0\nwords = [\"a\", \"b\"]\n") {
		t.Errorf("resolved recipe lacks the [toy] table:\n%s", text)
	}
	back, err := configs.Load(resolved)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := back.Diff(rec); err != nil || d != "" {
		t.Errorf("resolved recipe loads back different: %q %v", d, err)
	}
	if !reflect.DeepEqual(*configs.SectionOf[toy](back, "toy"), *got) {
		t.Errorf("resolved [toy] %+v, want %+v", *configs.SectionOf[toy](back, "toy"), *got)
	}
}

// TestToyKindErrors: the kind's own section is decoded and checked through its registration,
// with the file, line and key in every error, as for the shared sections.
func TestToyKindErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{"[toy]\nsteps = \"four\"\n", `toy.toml:6: toy.steps: wrong type: got a string, want an integer`},
		{"[toy]\nstpes = 4\n", `toy.toml:6: unknown key "toy.stpes" (did you mean "toy.steps"?)`},
		{"[toy]\nsteps = 0\n", `toy.toml:6: toy.steps: must be >= 1, got 0`},
		{"[toy]\nscale = -1.0\n", `toy.toml:6: toy.scale: must be > 0, got -1`},
		{"[toy]\nwords = [\"a\", \"a\"]\n", `toy.toml:6: toy.words: "a" listed twice`},
		{"[toy]\nsteps = 2000\n", `toy.toml:6: toy.steps: toy.steps = 2000 exceeds train.steps = 1000`},
		{"[data]\ndir = \"x\"\n", `toy.toml:5: section [data] is not read by kind "toy" (it reads: tokenizer, train, toy)`},
		{"[tyo]\nsteps = 1\n", `toy.toml:5: unknown key "tyo" (did you mean "toy"?)`},
	} {
		_, err := configs.Load(write(t, dir, head+c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
	_, err := configs.Load(write(t, dir, "kind = \"toy\"\ntoy = 3\n[tokenizer]\ntrain = true\n"))
	if want := `toy.toml:2: toy: wrong type: got an integer, want a table`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("toy = 3: err = %v, want %q", err, want)
	}
}
