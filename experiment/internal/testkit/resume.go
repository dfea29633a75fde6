package testkit

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
)

// Resume is the resume harness of the kinds' tests: it runs rec through, then again
// interrupted in phase after `at` steps, then resumed from the interrupted run's directory. It
// fails t unless the interrupted run fails saying "interrupted" and the resumed run succeeds
// and says where it resumed ("resume: "); it returns the two finished run directories and what
// the resumed run printed.
func Resume(t *testing.T, rec *configs.Recipe, phase string, at int) (full, resumed, out string) {
	t.Helper()
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard, InterruptPhase: phase, InterruptAt: at})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	var b strings.Builder
	resumed, err = experiment.Run(context.Background(), rec, experiment.Options{Out: &b, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), "resume: ") {
		t.Errorf("the resumed run does not say where it resumed:\n%s", b.String())
	}
	return full, resumed, b.String()
}

// SameCheckpoint fails t unless the latest checkpoints under the directories a and b are both
// at step and hold the same tensors, bit for bit (where prefixes the messages); it returns a's.
func SameCheckpoint(t *testing.T, where, a, b string, step int) *checkpoints.Checkpoint {
	t.Helper()
	x, y := loadBoth(t, checkpoints.Load, a, b)
	if len(x.Params) == 0 || len(x.Params) != len(y.Params) || x.Trainer.Step != step || y.Trainer.Step != step {
		t.Fatalf("%scheckpoints of %d and %d tensors at steps %d, %d, want step %d", where, len(x.Params), len(y.Params), x.Trainer.Step, y.Trainer.Step, step)
	}
	for i := range x.Params {
		for j, v := range x.Params[i].Data {
			if math.Float32bits(v) != math.Float32bits(y.Params[i].Data[j]) {
				t.Fatalf("%s%s[%d] = %v resumed, %v uninterrupted", where, x.Params[i].Name, j, y.Params[i].Data[j], v)
			}
		}
	}
	return x
}

// WriteRecipe writes a recipe's text to dir/name and loads it.
func WriteRecipe(t *testing.T, dir, name, text string) *configs.Recipe {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return RecipeFile(t, path)
}

// SciFactDir is the absolute path of the repository's datasets/scifact, from a kind package's
// directory (experiment/<kind>).
func SciFactDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "datasets", "scifact"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
