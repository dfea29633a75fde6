package hybrid

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// copyTestdata copies testdata/ (the tiny recipe, its BEIR set and source runs) to a temporary
// directory and returns the copied recipe's path.
func copyTestdata(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(root, strings.TrimPrefix(p, "testdata"))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "tiny.toml")
}

func runRecipe(t *testing.T, path string, o experiment.Options) (string, string, error) {
	t.Helper()
	rec := testkit.RecipeFile(t, path)
	var out bytes.Buffer
	o.Out = &out
	dir, err := experiment.Run(context.Background(), rec, o)
	return dir, out.String(), err
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTinyRecipeEndToEnd runs testdata/tiny.toml (two hand-made source runs on a tiny BEIR
// set) and checks what it writes against numbers worked out by hand and against the fusion
// functions applied to the source files.
func TestTinyRecipeEndToEnd(t *testing.T) {
	recipe := copyTestdata(t)
	root := filepath.Dir(recipe)
	dir, out, err := runRecipe(t, recipe, experiment.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if filepath.Dir(dir) != filepath.Join(root, "runs") || !strings.HasPrefix(filepath.Base(dir), "hybrid-tiny-") {
		t.Fatalf("run directory %s", dir)
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	// alpha:bm25 on test by hand: q4 ranks its relevant d4 2nd (nDCG 1/log2 3), q5 its d5 1st and
	// d6 3rd ((1 + 1/2) / (1 + 1/log2 3)).
	bm25 := (1/math.Log2(3) + 1.5/(1+1/math.Log2(3))) / 2
	for k, want := range map[string]float64{
		"alpha:bm25/nDCG@10": bm25, "alpha:bm25/MRR@10": 0.75, "alpha:bm25/train_seconds": 0,
		"alpha:dense/query_ms": 1.5, "alpha:dense/train_seconds": 12.5,
		"beta:splade/index_bytes": 4096, "beta:splade/query_ms": 2.5, "beta:splade/train_seconds": 30,
		// dense_bm25 (convex): w = (0.25, 0.75), see below; both test queries and both dev
		// queries rank their relevant passages first.
		"dense_bm25/nDCG@10": 1, "dense_bm25.dev/nDCG@10": 1, "dense_bm25/Recall@100": 1,
	} {
		if got, ok := m[k]; !ok || math.Abs(got-want) > 1e-12 {
			t.Errorf("metrics %s = %v (%v), want %v", k, got, ok, want)
		}
	}
	for _, k := range []string{"alpha:dense/index_bytes", "alpha:bm25/query_ms"} { // not reported by the source
		if _, ok := m[k]; ok {
			t.Errorf("metrics has %s, which no source reports", k)
		}
	}
	// latest:alpha read the newest finished alpha run, not the newer unfinished one.
	var src struct{ Dirs map[string]string }
	json.Unmarshal([]byte(read(t, filepath.Join(dir, SourcesFile))), &src)
	if want := filepath.Join(root, "runs", "alpha-20260101-000000"); src.Dirs["alpha"] != want {
		t.Errorf("alpha read from %s, want %s", src.Dirs["alpha"], want)
	}
	// The weights by hand (dev): with w the dense weight, q2's d2 (relevant) beats d5 iff
	// 0.875w + (1 - w) > w + 0.6(1 - w), i.e. w < 0.762; q3's d3 beats d1 iff w > 0.139; so 0.25,
	// 0.5 and 0.75 all reach nDCG@10 = 1 and the first of them is kept.
	var weights map[string]struct {
		Weights []float64
		RRFK    int `json:"rrf_k"`
	}
	if err := json.Unmarshal([]byte(read(t, filepath.Join(dir, WeightsFile))), &weights); err != nil {
		t.Fatal(err)
	}
	if w := weights["dense_bm25"].Weights; !reflect.DeepEqual(w, []float64{0.25, 0.75}) {
		t.Errorf("dense_bm25 weights %v, want [0.25 0.75]", w)
	}
	if weights["dense_bm25_rrf"].RRFK != 60 {
		t.Errorf("dense_bm25_rrf: %+v, want rrf_k 60", weights["dense_bm25_rrf"])
	}
	// The written rankings are the fusion functions of the source files: test q4 of dense_bm25
	// by hand, d4 0.25 + 0.75 x 3.5/4.5, d1 0.25 x 0.1/0.6 + 0.75.
	ds, err := data.Load(filepath.Join(root, "tiny"), "dev", "test")
	if err != nil {
		t.Fatal(err)
	}
	src1 := func(sys, split string) eval.Run {
		r, err := ReadRun(TRECPath(src.Dirs["alpha"], split, sys), ds.Qrels[split].QueryIDs(), ds.Corpus, 100)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	written := func(name string) eval.Run {
		r, err := eval.ReadTREC(TRECPath(dir, "test", name))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	got := written("dense_bm25")
	assertHits(t, "test dense_bm25 q4", got["q4"][:2], hits("d4", 0.25+0.75*3.5/4.5, "d1", 0.25*0.1/0.6+0.75))
	dense, lexical := src1("dense", "test"), src1("bm25", "test")
	for name, want := range map[string]eval.Run{"dense_bm25": Convex([]float64{0.25, 0.75}, 1000, dense, lexical), "dense_bm25_rrf": RRF(60, 1000, dense, lexical)} {
		got := written(name)
		for q := range want {
			assertHits(t, name+" "+q, got[q], want[q])
		}
	}
	if !strings.Contains(read(t, TRECPath(dir, "test", "dense_bm25")), "q4 Q0 d4 1 0.8333333333333334 dense_bm25\n") {
		t.Errorf("test.dense_bm25.trec lacks its first line")
	}
	res := read(t, filepath.Join(dir, ResultsFile))
	for _, row := range []string{
		"| system | dev nDCG@10 | test nDCG@10 | test Recall@100 | index bytes | query ms | train s | fusion |",
		"| beta:splade | 0.8155 | 0.6622 | 1.0000 | 4096 | 2.50 | 30 | - |",
		"| dense_bm25 | 1.0000 | 1.0000 | 1.0000 | - | - | 12.5 | convex 0.25 alpha:dense + 0.75 alpha:bm25 (min-max; weights from dev nDCG@10) |",
		"| dense_bm25_rrf | ",
	} {
		if !strings.Contains(res, row) {
			t.Errorf("results.md lacks %q:\n%s", row, res)
		}
	}
	if n := strings.Count(read(t, filepath.Join(dir, experiment.LogFile)), `"event":"weights"`); n != 5+6 {
		t.Errorf("log.jsonl holds %d weight trials, want 5 (dense_bm25) + 6 (all3)", n)
	}
	// -resume rewrites the same files.
	before := map[string]string{}
	for _, f := range []string{experiment.MetricsFile, ResultsFile, WeightsFile, SourcesFile, "runs/test.all3.trec", "runs/dev.dense_bm25.trec"} {
		before[f] = read(t, filepath.Join(dir, f))
	}
	rec, err := configs.Load(filepath.Join(dir, experiment.ResolvedRecipeFile))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := rec.Diff(testkit.RecipeFile(t, recipe)); err != nil || d != "" {
		t.Errorf("resolved recipe loads back different: %q %v", d, err)
	}
	again, err := experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: dir})
	if err != nil || again != dir {
		t.Fatalf("resume: %s %v", again, err)
	}
	for f, b := range before {
		if read(t, filepath.Join(dir, f)) != b {
			t.Errorf("resume changed %s", f)
		}
	}
}

// TestFailedRunLeavesNoDirectory: a bad source fails the run with an error naming the file and
// line, and leaves no run directory; so does a source whose metrics.json disagrees with its
// TREC file.
func TestFailedRunLeavesNoDirectory(t *testing.T) {
	for _, c := range []struct {
		name, file, text, want string
	}{
		{"NaN", "runs/alpha-20260101-000000/runs/test.bm25.trec", "q4 Q0 d1 1 NaN bm25\nq5 Q0 d5 1 2.0 bm25\n", `test.bm25.trec:1: run: score "NaN" is not a finite number`},
		{"missing", "runs/beta-20260101-000000/runs/dev.splade.trec", "", "dev.splade.trec: no such file"},
		{"reported", "runs/alpha-20260101-000000/metrics.json", `{"bm25/nDCG@10": 0.5, "train/seconds": 1}`, "test.bm25.trec: scores nDCG@10 = 0.775325 against data.dir's qrels, but its run's metrics.json reports bm25/nDCG@10 = 0.500000"},
		{"unknown query", "runs/alpha-20260101-000000/runs/dev.dense.trec", "q2 Q0 d5 1 0.9 dense\nq3 Q0 d3 1 0.95 dense\nq4 Q0 d4 1 0.1 dense\n", `dev.dense.trec:3: query id "q4" (field 1) is not a query of this split's qrels`},
	} {
		recipe := copyTestdata(t)
		root := filepath.Dir(recipe)
		p := filepath.Join(root, c.file)
		if c.text == "" {
			os.Remove(p)
		} else if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := runRecipe(t, recipe, experiment.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if left, _ := filepath.Glob(filepath.Join(root, "runs", "hybrid-tiny-*")); len(left) > 0 {
			t.Errorf("%s: a failed run left %v", c.name, left)
		}
	}
}

// TestRecipeErrors: [hybrid] mistakes stop configs.Load with the file, line and key.
func TestRecipeErrors(t *testing.T) {
	// 0, 0.001, ..., 1: 501,501 triples sum to 1, past MaxWeightVectors.
	g := make([]string, 1001)
	for i := range g {
		g[i] = strconv.FormatFloat(float64(i)/1000, 'f', -1, 64)
	}
	thousandths := "[" + strings.Join(g, ", ") + "]"
	recipe := copyTestdata(t)
	base := read(t, recipe)
	for _, c := range []struct{ old, new, want string }{
		{`systems = ["alpha:dense", "alpha:bm25"]
method = "rrf"`, `systems = ["alpha:dense", "gamma:bm25"]
method = "rrf"`, `tiny.toml:22: hybrid.fuse.dense_bm25_rrf.systems: "gamma:bm25": no source "gamma" in [hybrid.sources] (sources: alpha, beta)`},
		{`method = "rrf"`, `method = "borda"`, `tiny.toml:23: hybrid.fuse.dense_bm25_rrf.method: unknown value "borda", want one of "rrf" or "convex"`},
		{`method = "rrf"`, "method = \"rrf\"\ngrid = [0.5]", `tiny.toml:24: hybrid.fuse.dense_bm25_rrf.grid: a weight grid is for method = "convex"`},
		{`grid = [0.0, 0.5, 1.0]`, `grid = [0.3, 0.6]`, `tiny.toml:33: hybrid.fuse.all3.grid: no 3 values of [0.3 0.6] sum to 1`},
		{`grid = [0.0, 0.5, 1.0]`, `grid = [0.0, 1.5]`, `tiny.toml:33: hybrid.fuse.all3.grid: must be in [0, 1], got 1.5`},
		{`[hybrid.fuse.all3]`, `[hybrid.fuse."all.3"]`, `hybrid.fuse.all.3: name "all.3"`},
		{`systems = ["alpha:bm25", "alpha:dense", "beta:splade"]
metrics`, `systems = ["alpha:bm25", "alpha bm25"]
metrics`, `tiny.toml:13: hybrid.systems: "alpha bm25": want "alias:system"`},
		{`table = ["nDCG@10", "Recall@100"]`, `table = ["nDCG@10", "P@10"]`, `hybrid.table: "P@10" is not one of hybrid.metrics`},
		{`dir = "tiny"`, "dir = \"tiny\"\ndev_split = \"test\"", `data.dev_split and data.test_split are both "test"`},
		{`method = "rrf"`, "method = \"rrf\"\nrrf_k = 0", `tiny.toml:24: hybrid.fuse.dense_bm25_rrf.rrf_k: must be >= 1, got 0`},
		{`beta = "beta-20260101-000000"`, `beta = "latest:../beta"`, `hybrid.sources.beta: "latest:../beta": a recipe name holds no path separator`},
		{`[hybrid.fuse.all3]`, "[hybrid.fuse.all3]\nweights = [1]", `unknown key "hybrid.fuse.all3.weights"`},
		{`grid = [0.0, 0.5, 1.0]`, "grid = " + thousandths, `tiny.toml:33: hybrid.fuse.all3.grid: more than 20000 weight vectors of 3 systems from 1001 grid values`},
	} {
		if !strings.Contains(base, c.old) {
			t.Fatalf("tiny.toml lacks %q", c.old)
		}
		if err := os.WriteFile(recipe, []byte(strings.Replace(base, c.old, c.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := configs.Load(recipe)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.new, err, c.want)
		}
	}
}

// TestSourceWithoutMetrics: a source run without metrics.json (an explicit directory, not
// "latest:") is read; it has no costs and nothing to cross-check.
func TestSourceWithoutMetrics(t *testing.T) {
	recipe := copyTestdata(t)
	if err := os.Remove(filepath.Join(filepath.Dir(recipe), "runs", "beta-20260101-000000", experiment.MetricsFile)); err != nil {
		t.Fatal(err)
	}
	dir, out, err := runRecipe(t, recipe, experiment.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["beta:splade/index_bytes"]; ok || m["beta:splade/nDCG@10"] == 0 || m["alpha:dense/train_seconds"] != 12.5 {
		t.Errorf("metrics: beta:splade/index_bytes present %v, beta:splade/nDCG@10 %v, alpha:dense/train_seconds %v",
			ok, m["beta:splade/nDCG@10"], m["alpha:dense/train_seconds"])
	}
	if !strings.Contains(read(t, filepath.Join(dir, ResultsFile)), "| beta:splade | 0.8155 | 0.6622 | 1.0000 | - | - | - | - |") {
		t.Errorf("results.md:\n%s", read(t, filepath.Join(dir, ResultsFile)))
	}
}

// TestRemoveWritten: after a write fails in a fresh run directory, removeWritten leaves only what
// experiment.RemoveIfUntrained (which experiment.Run calls on a failed fresh run) removes.
func TestRemoveWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hybrid-tiny-20260101-000000")
	for f, text := range map[string]string{experiment.ResolvedRecipeFile: "kind = \"hybrid\"\n", experiment.LockFile: "1\n",
		SourcesFile: "{}\n", experiment.LogFile: "{}\n", WeightsFile: "{}\n", "runs/dev.x.trec": "q Q0 d 1 1 x\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	experiment.RemoveIfUntrained(dir)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("RemoveIfUntrained removed a directory holding rankings: %v", err)
	}
	removeWritten(dir)
	experiment.RemoveIfUntrained(dir)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(dir)
		t.Errorf("the directory stays after removeWritten: %v", entries)
	}
}
