package rag

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
)

// tinyRAGRecipe writes a kind = "rag" recipe small enough for a few seconds' run (no joint
// training) with reader.ffn = ffn and readerExtra appended to its [reader] section, and loads it.
func tinyRAGRecipe(t *testing.T, ffn int, readerExtra string) *configs.Recipe {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rag-tiny.toml")
	return testkit.Recipe(t, "rag-tiny", path, map[string]string{"FFN": fmt.Sprint(ffn)}, readerExtra)
}

// readerParams returns the reader.* tensors of a run's latest checkpoint by name.
func readerParams(t *testing.T, dir string) map[string][]float32 {
	t.Helper()
	ck, err := checkpoints.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, p := range ck.Params {
		if strings.HasPrefix(p.Name, "reader.") {
			out[p.Name] = p.Data
		}
	}
	return out
}

// TestReaderInitFrom: a rag run is exported (GPT-2 layout); a second run with reader.init_from
// pointing at the export and no reader training ends with the first run's reader bit for bit
// and the same reader metrics; a third continues training from it (its reader moves, and its
// first fine-tuning loss is the trained reader's, far below a fresh one's). A directory whose
// tensor has the wrong shape fails naming the tensor and both shapes.
func TestReaderInitFrom(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	run := func(rec *configs.Recipe) (string, map[string]float64, string) {
		t.Helper()
		var out strings.Builder
		dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		m, err := experiment.ReadMetrics(dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, m, out.String()
	}
	dir1, m1, _ := run(tinyRAGRecipe(t, 64, "pretrain_passes = 1\nfinetune_steps = 60\nfinetune_lr = 3e-3\n"))
	exp := filepath.Join(t.TempDir(), "export")
	if err := export.Export(dir1, exp, export.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(exp, export.GenerationConfigFile)); err != nil {
		t.Fatal(err)
	}

	dir2, m2, out2 := run(tinyRAGRecipe(t, 64, "pretrain_passes = 0\nfinetune_steps = 0\ninit_from = \""+exp+"\"\n"))
	if !strings.Contains(out2, "parameters from "+exp+" (export layout)") {
		t.Errorf("run output does not report the import:\n%s", out2)
	}
	p1, p2 := readerParams(t, dir1), readerParams(t, dir2)
	if len(p1) == 0 || len(p1) != len(p2) {
		t.Fatalf("%d reader tensors vs %d", len(p1), len(p2))
	}
	for name, a := range p1 {
		for i, v := range a {
			if math.Float32bits(v) != math.Float32bits(p2[name][i]) {
				t.Fatalf("%s[%d]: %g after init_from, %g exported", name, i, p2[name][i], v)
			}
		}
	}
	for _, k := range []string{"closed_book/EM", "gold_entry/EM", "bm25_top1/EM"} {
		if _, ok := m1[k]; !ok {
			t.Errorf("no %s in %s/metrics.json", k, dir1)
		}
		if m1[k] != m2[k] {
			t.Errorf("%s: %g after init_from, %g in the exported run", k, m2[k], m1[k])
		}
	}

	// Continue training: the first fine-tuning loss starts from the imported reader's.
	first := func(out string) float64 {
		t.Helper()
		var steps int
		var lf, ll float64
		i := strings.Index(out, "reader_finetune: ")
		if i < 0 {
			t.Fatalf("no reader_finetune line in\n%s", out)
		}
		if _, err := fmt.Sscanf(out[i:], "reader_finetune: %d steps in", &steps); err != nil {
			t.Fatal(err)
		}
		j := strings.Index(out[i:], "loss ")
		if _, err := fmt.Sscanf(out[i+j:], "loss %g -> %g", &lf, &ll); err != nil {
			t.Fatal(err)
		}
		return lf
	}
	_, _, fresh := run(tinyRAGRecipe(t, 64, "pretrain_passes = 0\nfinetune_steps = 10\n"))
	cont, _, contOut := run(tinyRAGRecipe(t, 64, "pretrain_passes = 0\nfinetune_steps = 10\ninit_from = \""+exp+"\"\n"))
	lf, lc := first(fresh), first(contOut)
	t.Logf("closed_book/EM %g, gold_entry/EM %g; first fine-tuning loss %g from scratch, %g from init_from", m1["closed_book/EM"], m1["gold_entry/EM"], lf, lc)
	if !(lc < 0.8*lf) {
		t.Errorf("first fine-tuning loss %g from init_from, %g from scratch; want the imported reader's to be lower", lc, lf)
	}
	if p3 := readerParams(t, cont); p3["reader.ln_f.weight"][0] == p1["reader.ln_f.weight"][0] {
		t.Error("the reader did not move in training after init_from")
	}

	// A wrongly shaped tensor.
	bad := tinyRAGRecipe(t, 48, "finetune_steps = 0\ninit_from = \""+exp+"\"\n")
	_, err := experiment.Run(context.Background(), bad, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "reader.init_from") || !strings.Contains(err.Error(), "transformer.h.0.mlp.c_fc.weight") ||
		!strings.Contains(err.Error(), "[32 64]") || !strings.Contains(err.Error(), "[32 48]") {
		t.Errorf("ffn 48 vs 64: %v", err)
	}
}
