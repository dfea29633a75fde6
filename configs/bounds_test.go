package configs

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLoadBounds: issue 37's recipes whose sizes passed validation and then died in a fatal
// allocation (bow with tokenizer.max_length 1e9, model.max_position 1e9, model.hidden 1e6),
// and temperature 1e30 or a warm-up longer than training, which trained nothing without a
// word, now stop in Load with one line naming the file, line and key.
func TestLoadBounds(t *testing.T) {
	dir := fixture(t)
	for i, c := range []struct{ text, want string }{
		{"[model]\nencoder = \"bow\"\n[tokenizer]\nmax_length = 1000000000\ntrain = true\n[data]\ndir = \"data\"\n", `:4: tokenizer.max_length: must be <= 32768 (configs.Max*, the documented bound), got 1000000000`},
		{"[model]\nencoder = \"transformer\"\nmax_position = 1000000000\n" + base, `:3: model.max_position: must be <= 32768`},
		{"[model]\nencoder = \"transformer\"\nhidden = 1000000\n" + base, `:3: model.hidden: must be <= 16384`},
		{"[model]\nlayers = 100000\n" + base, `:2: model.layers: must be <= 256`},
		{"[model]\nffn = 1000000000\n" + base, `:2: model.ffn: must be <= 65536`},
		{"[train]\nbatch_size = 100000000\n" + base, `:2: train.batch_size: must be <= 65536`},
		{"[loss]\ntemperature = 1e30\n" + base, `:2: loss.temperature: must be <= 1000`},
		{"[train]\nsteps = 10\nwarmup_steps = 1000000000\n" + base, `:3: train.warmup_steps: train.warmup_steps = 1000000000 exceeds train.steps = 10`},
	} {
		path := filepath.Join(dir, "bounds"+strconv.Itoa(i)+".toml")
		writeRecipe(t, path, c.text)
		_, err := Load(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("case %d: %v\nwant one line %q...", i, err, path+c.want)
		}
	}
}

// TestResolvedShortRunLoads: a short run's recipe.resolved.toml writes the default
// warmup_steps out; it must load again (resume, export), the warm-up rule being the user's.
func TestResolvedShortRunLoads(t *testing.T) {
	dir := fixture(t)
	path := filepath.Join(dir, "short.toml")
	writeRecipe(t, path, "[train]\nsteps = 4\n"+base)
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	resolved := filepath.Join(dir, "short.resolved.toml")
	if err := r.WriteResolved(resolved); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(resolved); err != nil {
		t.Fatalf("resolved short recipe: %v", err)
	}
}
