package bench

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The verdict on constructed numbers: linear growth passes (the limit is inclusive), any of
// wall time, CPU time or peak RSS growing faster than the passages fails with its reason, a
// tolerance admits that much more, and the largest size's peak is capped.
func TestScaleVerdictOf(t *testing.T) {
	run := func(n int, wall, cpu float64, rss int64) ScaleRun {
		return ScaleRun{Passages: n, WallSeconds: wall, CPUSeconds: cpu, PeakRSSKiB: rss}
	}
	// docs/results/scale-synth.md's measurements: 27 / 108 / 406 s wall, 413 / 970 / 2881 MB.
	measured := []ScaleRun{run(100000, 27, 30, 413<<10), run(500000, 108, 120, 970<<10), run(2000000, 406, 450, 2881<<10)}
	// The two series of 2026-12-01 21:38 and 21:49, whose consecutive CPU ratios were 4.54x for
	// 4x and 5.02x for 5x: linear within the noise, exponents 0.976 and 1.000.
	loaded := []ScaleRun{run(100000, 25.2, 25.0, 386<<10), run(500000, 100.6, 103.3, 950<<10), run(2000000, 442.3, 469.3, 2840<<10)}
	quiet := []ScaleRun{run(100000, 22.8, 24.3, 395<<10), run(500000, 113.3, 121.7, 868<<10), run(2000000, 440.9, 486.0, 2843<<10)}
	nlogn := func(n int) float64 { return float64(n) * math.Log(float64(n)) / 1e5 }
	for _, c := range []struct {
		name string
		runs []ScaleRun
		max  int64
		tol  float64
		want []string // reasons, by substring; none: OK
	}{
		{"measured", measured, 4 << 20, 0, nil},
		{"loaded series", loaded, 4 << 20, DefaultScaleTolerance, nil},
		{"quiet series", quiet, 4 << 20, DefaultScaleTolerance, nil},
		{"quiet series, no slack", quiet, 4 << 20, 0, []string{"CPU time grows as passages^1.000"}},
		{"exactly linear", []ScaleRun{run(100, 1, 2, 1000), run(500, 5, 10, 5000)}, 0, 0, nil},
		{"one run under the cap", measured[:1], 4 << 20, 0, nil},
		{"rss superlinear", []ScaleRun{run(100, 1, 1, 1000), run(500, 5, 5, 5100)}, 0, 0,
			[]string{"peak RSS grows as passages^1.012 from 100 to 500 passages (limit 1.000)"}},
		{"wall and cpu superlinear", []ScaleRun{run(100, 1, 1, 1000), run(200, 2.1, 2.5, 1500)}, 0, 0,
			[]string{"wall time grows as passages^1.070", "CPU time grows as passages^1.322"}},
		{"within tolerance", []ScaleRun{run(100, 1, 1, 1000), run(200, 2.1, 2.1, 1500)}, 0, 0.08, nil},
		{"quadratic", []ScaleRun{run(100, 1, 1, 1000), run(200, 1.5, 1.5, 1500), run(400, 16, 2, 2000)}, 0, DefaultScaleTolerance,
			[]string{"wall time grows as passages^2.000"}},
		{"N log N over 100k..2M", []ScaleRun{run(100000, nlogn(100000), 1, 1000), run(500000, nlogn(500000), 5, 5000), run(2000000, nlogn(2000000), 20, 20000)},
			0, DefaultScaleTolerance, []string{"wall time grows as passages^1.077"}},
		{"over the cap", measured, 2 << 20, 0, []string{"peak RSS at 2000000 passages is 2950144 KiB, above 2097152 KiB"}},
		{"nothing measured", []ScaleRun{run(100, 0, 1, 1000), run(200, 1, 1, 1000)}, 0, 0, []string{"wall time: no growth exponent"}},
	} {
		v := ScaleVerdictOf(c.runs, c.max, c.tol)
		if v.OK != (len(c.want) == 0) || len(v.Reasons) != len(c.want) {
			t.Errorf("%s: %+v, want reasons %q", c.name, v, c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(v.Reasons[i], w) {
				t.Errorf("%s: reason %d = %q, want it to contain %q", c.name, i, v.Reasons[i], w)
			}
		}
	}
}

// EditRecipe replaces the lines of the keys it is given, in their sections, and refuses a key
// the recipe does not set.
func TestEditRecipe(t *testing.T) {
	text := "# steps = 1\nname = \"x\"\n[train]\nsteps = 200 # long\nbatch_size = 32\n[index]\nstream_above = 50000\n"
	got, err := EditRecipe(text, map[string]string{"name": `"y"`, "train.steps": "5", "index.stream_above": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "# steps = 1\nname = \"y\"\n[train]\nsteps = 5\nbatch_size = 32\n[index]\nstream_above = 0\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := EditRecipe(text, map[string]string{"train.steps": "5", "train.lr": "1e-3", "steps": "3"}); err == nil ||
		!strings.Contains(err.Error(), "keys [steps train.lr] are not set on a line of the recipe") {
		t.Errorf("unknown keys: %v", err)
	}
}

// RunScale end to end on two tiny sizes (the recipe cut to 5 steps and a 100-passage stream
// threshold, so both runs stream): the corpora are generated into the data directory, each run
// is measured in its child (peak RSS and CPU reported, the metrics read from its run
// directory), the table has a row per size and the ratio line, the JSON is written, and a
// second call reuses the corpora instead of generating them again.
func TestRunScaleTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/train and runs it twice")
	}
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS of a child is read from getrusage on Linux")
	}
	dir := t.TempDir()
	train := filepath.Join(dir, "train")
	build := exec.Command("go", "build", "-o", train, "../cmd/train")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/train: %v\n%s", err, out)
	}
	o := DefaultScaleOptions()
	o.Sizes, o.Queries = []int{4000, 2000}, 200
	o.DataDir, o.RunsDir, o.Recipe, o.Train = filepath.Join(dir, "data"), filepath.Join(dir, "runs"), "../recipes/scale-synth.toml", train
	o.Set = map[string]string{"train.steps": "5", "train.warmup_steps": "1", "index.stream_above": "100"}
	o.JSON = filepath.Join(dir, "scale.json")
	var out, log bytes.Buffer
	o.Out, o.Log = &out, &log
	res, err := RunScale(o)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), log.String())
	}
	t.Logf("\n%s%s", log.String(), out.String())
	if len(res.Runs) != 2 || res.Runs[0].Passages != 2000 || res.Runs[1].Passages != 4000 {
		t.Fatalf("runs %+v, want 2000 then 4000 passages", res.Runs)
	}
	for _, r := range res.Runs {
		if r.PeakRSSKiB < 10<<10 || r.PeakRSSKiB > 3<<20 || r.CPUSeconds <= 0 || r.WallSeconds <= 0 || r.DenseNDCG10 <= 0 || r.BM25NDCG10 <= 0 {
			t.Errorf("implausible run %+v", r)
		}
		if _, err := os.Stat(filepath.Join(r.RunDir, "corpus", "tokens.tok")); err != nil {
			t.Errorf("%d passages: the run did not stream (index.stream_above = 100): %v", r.Passages, err)
		}
	}
	for _, want := range []string{"scale: ../recipes/scale-synth.toml with index.stream_above = 100, train.steps = 5, train.warmup_steps = 1\n",
		"\n      2000 ", "\n      4000 ", "\n     ratio ", "(x2.00 passages)", "verdict: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(log.String(), "scale: wrote 2000 passages, 200 queries into ") {
		t.Errorf("log: %s", log.String())
	}
	if b, err := os.ReadFile(o.JSON); err != nil || !bytes.Contains(b, []byte(`"peak_rss_kib"`)) {
		t.Errorf("JSON %s: %v", b, err)
	}
	log.Reset()
	o.Sizes, o.JSON = []int{2000}, ""
	if _, err := RunScale(o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "scale: wrote") {
		t.Errorf("the second call generated its corpus again:\n%s", log.String())
	}
	o.Set = map[string]string{"train.stepz": "5"}
	if _, err := RunScale(o); err == nil || !strings.Contains(err.Error(), "keys [train.stepz] are not set") {
		t.Errorf("unknown override: %v", err)
	}
}
