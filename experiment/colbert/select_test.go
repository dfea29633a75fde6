package colbert

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	cb "github.com/ragtrain/ragtrain/colbert"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// The grid is laid out in order of work: fewest ncells, then fewest ndocs, then the highest
// threshold; an empty list is the single value; repeats count once.
func TestPlaidGridOrder(t *testing.T) {
	c := defaultConfig()
	c.SelectNCells, c.SelectNDocs = []int{4, 1, 4}, []int{256, 64}
	c.SelectCentroidScoreThreshold = []float64{0.3, 0.5}
	var got []string
	for _, p := range c.plaidGrid() {
		got = append(got, strconv.Itoa(p.NCells)+"/"+strconv.Itoa(p.NDocs)+"/"+strconv.FormatFloat(p.CentroidScoreThreshold, 'g', -1, 64))
	}
	want := []string{"1/64/0.5", "1/64/0.3", "1/256/0.5", "1/256/0.3", "4/64/0.5", "4/64/0.3", "4/256/0.5", "4/256/0.3"}
	if !slices.Equal(got, want) {
		t.Fatalf("grid %v, want %v", got, want)
	}
	c = defaultConfig()
	c.SelectNDocs = []int{16}
	if g := c.plaidGrid(); len(g) != 1 || g[0] != (cb.SearchParams{NCells: 4, NDocs: 16, CentroidScoreThreshold: 0.4}) {
		t.Fatalf("grid %v", g)
	}
}

// The first point within the tolerance of exact is chosen, in the grid's order; else the first
// of the best.
func TestPickPlaid(t *testing.T) {
	for _, c := range []struct {
		scores     []float64
		exact, tol float64
		want       int
		within     bool
	}{
		{[]float64{0.60, 0.695, 0.70, 0.71}, 0.70, 0.005, 1, true},  // 0.695 = 0.70 - 0.005: in
		{[]float64{0.60, 0.6949, 0.70, 0.71}, 0.70, 0.005, 2, true}, // just outside
		{[]float64{0.60, 0.69, 0.68, 0.69}, 0.70, 0.005, 1, false},  // none: the first best
		{[]float64{0.72}, 0.70, 0, 0, true},
		{[]float64{0.5, 0.7, 0.7}, 0.70, 0, 1, true},
	} {
		if got, within := pickPlaid(c.scores, c.exact, c.tol); got != c.want || within != c.within {
			t.Errorf("pickPlaid(%v, %v, %v) = %d, %v; want %d, %v", c.scores, c.exact, c.tol, got, within, c.want, c.within)
		}
	}
}

// A run with a dev grid writes every point's dev scores, chooses the first within the tolerance
// of exact MaxSim's dev nDCG@10 (else the best), searches test with it, and train search's
// Searcher uses the same settings: its test ranking is the run's colbert_plaid TREC.
func TestPlaidSettingsChosenOnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	for _, tol := range []string{"0.005", "0.0"} {
		t.Run("tolerance "+tol, func(t *testing.T) {
			rec := tinyRecipe(t, "colbert_contrastive", "", "ndocs = 64\n",
				"ndocs = 64\nselect_ncells = [1, 2]\nselect_ndocs = [8, 64]\nselect_tolerance = "+tol+"\n")
			dir, err := experiment.Run(t.Context(), rec, experiment.Options{Progress: io.Discard, Out: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, experiment.RunsDir, "dev."+SelectFile))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
			if len(lines) != 4 {
				t.Fatalf("%d grid lines, want 4:\n%s", len(lines), b)
			}
			mt, err := experiment.ReadMetrics(dir)
			if err != nil {
				t.Fatal(err)
			}
			// the lone query's encoding, timed apart from the search (both systems encode alike)
			if e := mt["colbert/query_encode_ms"]; !(e > 0) || mt["colbert_plaid/query_encode_ms"] != e {
				t.Errorf("query_encode_ms: colbert %v, colbert_plaid %v", e, mt["colbert_plaid/query_encode_ms"])
			}
			exact, tolerance := mt["dev/colbert/nDCG@10"], map[string]float64{"0.005": 0.005, "0.0": 0}[tol]
			chosen, best, bestScore := -1, -1, -1.0
			var points [][]string
			for i, l := range lines {
				f := strings.Split(l, "\t")
				points = append(points, f)
				v, _ := strconv.ParseFloat(f[3], 64)
				if chosen < 0 && v >= exact-tolerance-5e-7 { // the file rounds to 6 places
					chosen = i
				}
				if v > bestScore {
					best, bestScore = i, v
				}
			}
			if chosen < 0 {
				chosen = best
			}
			want := points[chosen]
			got := []string{strconv.Itoa(int(mt["colbert_plaid/ncells"])), strconv.Itoa(int(mt["colbert_plaid/ndocs"])),
				strconv.FormatFloat(mt["colbert_plaid/centroid_score_threshold"], 'g', -1, 64)}
			t.Logf("exact dev nDCG@10 %.6f, chose %v of\n%s", exact, got, b)
			if !slices.Equal(got, want[:3]) {
				t.Fatalf("chose %v; the grid (exact dev nDCG@10 %.6f, tolerance %s):\n%s", got, exact, tol, b)
			}
			s, err := OpenSearcher(filepath.Join(dir, PlaidDir))
			if err != nil {
				t.Fatal(err)
			}
			if s.Params.NCells != int(mt["colbert_plaid/ncells"]) || s.Params.NDocs != int(mt["colbert_plaid/ndocs"]) {
				t.Fatalf("train search's settings %+v, the run's %v", s.Params, got)
			}
			ds, err := data.LoadJudged(rec.Data.Dir, "test")
			if err != nil {
				t.Fatal(err)
			}
			qids := ds.Qrels["test"].QueryIDs()
			texts := make([]string, len(qids))
			for i, q := range qids {
				texts[i], _ = ds.Queries.Text(q)
			}
			hits, err := s.SearchAll(texts, rec.Eval.Depth)
			if err != nil {
				t.Fatal(err)
			}
			run, err := eval.ReadTREC(filepath.Join(dir, experiment.RunsDir, "test.colbert_plaid.trec"))
			if err != nil {
				t.Fatal(err)
			}
			for i, q := range qids {
				if len(hits[i]) != len(run[q]) {
					t.Fatalf("query %s: %d hits, the run's file %d", q, len(hits[i]), len(run[q]))
				}
				for j := range hits[i] {
					if hits[i][j].DocID != run[q][j].DocID {
						t.Fatalf("query %s rank %d: %s, the run's file %s", q, j+1, hits[i][j].DocID, run[q][j].DocID)
					}
				}
			}
		})
	}
}

// Each select_* key is checked when the recipe is read, the error naming the file, line and key.
func TestPlaidSelectRecipeErrors(t *testing.T) {
	dir := testkit.NewSlice(t)
	path := filepath.Join(dir, "c.toml")
	head := "kind = \"colbert\"\n[data]\ndir = \"" + filepath.Join(dir, "data") + "\"\n[tokenizer]\ntrain = true\n[loss]\nname = \"colbert_contrastive\"\n[colbert]\n"
	for body, want := range map[string]string{
		"plaid = false\nselect_ncells = [1, 2]\n":                       "colbert.select_ncells: choosing the PLAID-style search settings on dev needs colbert.plaid = true",
		"select_ndocs = [2]\n":                                          "c.toml:9: colbert.select_ndocs: must be >= 4, got 2",
		"select_ncells = [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n": "c.toml:9: colbert.select_ncells: at most 16 values, got 17",
		"select_tolerance = -0.1\n":                                     "c.toml:9: colbert.select_tolerance: must be in [0, 1], got -0.1",
		"select_centroid_score_threshold = [0.3, nan]\n":                "c.toml:9: colbert.select_centroid_score_threshold",
		"select_ncells = [1, 2]\nselect_ndocs = [8, 4096]\n":            "",
	} {
		_, err := testkit.LoadText(t, path, head+body)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
}
