package splade_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/splade"
)

// TestPruningChosenOnDev: with splade.select_top_k_passage the run writes the dev grid, chooses
// the smallest value within the tolerance of the largest value's dev nDCG@10 (the file's own
// numbers, both tolerances), indexes every split with it (metrics.json, the index manifest, the
// terms per passage), and its test ranking is the one a run indexing at that value without a
// grid gives, byte for byte: pruning the largest value's vectors is pruning the full ones.
func TestPruningChosenOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	for _, tol := range []string{"0.0", "0.05"} {
		t.Run("tolerance "+tol, func(t *testing.T) {
			rec := tinyRecipe(t, "", "top_k_passage = 40\n", "top_k_passage = 40\nselect_top_k_passage = [40, 3, 10]\nselect_tolerance = "+tol+"\n")
			dir, err := experiment.Run(t.Context(), rec, experiment.Options{Progress: io.Discard, Out: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, experiment.RunsDir, "dev."+splade.SelectFile))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
			if len(lines) != 3 {
				t.Fatalf("%d grid lines, want 3 (3, 10, 40):\n%s", len(lines), b)
			}
			var ks []int
			var scores []float64
			for _, l := range lines {
				f := strings.Split(l, "\t")
				k, _ := strconv.Atoi(f[0])
				v, _ := strconv.ParseFloat(f[1], 64)
				ks, scores = append(ks, k), append(scores, v)
			}
			tolerance, _ := strconv.ParseFloat(tol, 64)
			want := ks[2]
			for i := range ks {
				if scores[i] >= scores[2]-tolerance-5e-7 { // the file rounds to 6 places
					want = ks[i]
					break
				}
			}
			t.Logf("chose top_k_passage %d of\n%s", want, b)
			m, err := experiment.ReadMetrics(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m["splade/top_k_passage"] != float64(want) || m["splade/passage_terms"] > float64(want) {
				t.Errorf("metrics: top_k_passage %v, %v terms per passage; want %d", m["splade/top_k_passage"], m["splade/passage_terms"], want)
			}
			mb, err := os.ReadFile(filepath.Join(dir, splade.IndexDir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			var man struct {
				Meta map[string]any `json:"meta"`
			}
			if err := json.Unmarshal(mb, &man); err != nil || man.Meta["top_k_passage"] != float64(want) {
				t.Errorf("the index manifest's top_k_passage %v (err %v), want %d", man.Meta["top_k_passage"], err, want)
			}
			// the same run indexing at the chosen value, no grid
			fixed := tinyRecipe(t, "", "top_k_passage = 40\n", "top_k_passage = "+strconv.Itoa(want)+"\n")
			fdir, err := experiment.Run(t.Context(), fixed, experiment.Options{Progress: io.Discard, Out: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			testkit.SameFile(t, filepath.Join(dir, "runs", "test.splade.trec"), filepath.Join(fdir, "runs", "test.splade.trec"))
		})
	}
}

// TestPruningSelectRecipeErrors: the grid's keys are checked when the recipe is read.
func TestPruningSelectRecipeErrors(t *testing.T) {
	rec := tinyRecipe(t, "")
	dir := filepath.Dir(rec.Data.Dir)
	for name, c := range map[string]struct{ old, new, want string }{
		"zero":      {"top_k_passage = 40\n", "top_k_passage = 40\nselect_top_k_passage = [0, 8]\n", "splade.select_top_k_passage: must be >= 1, got 0"},
		"too many":  {"top_k_passage = 40\n", "top_k_passage = 40\nselect_top_k_passage = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n", "splade.select_top_k_passage: at most 16 values, got 17"},
		"tolerance": {"top_k_passage = 40\n", "top_k_passage = 40\nselect_tolerance = 1.5\n", "splade.select_tolerance: must be in [0, 1], got 1.5"},
		"no dev":    {"top_k_passage = 40\n", "top_k_passage = 40\nselect_top_k_passage = [8]\n", "splade.select_top_k_passage: choosing the pruning on dev needs data.dev_split"},
	} {
		t.Run(name, func(t *testing.T) {
			text := strings.Replace(recipeText(t, rec), c.old, c.new, 1)
			if name == "no dev" {
				text = strings.Replace(text, "[data]\n", "[data]\ndev_split = \"\"\n", 1)
			}
			_, err := testkit.LoadText(t, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".toml"), text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}
