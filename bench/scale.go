package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/data/synth"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
)

// ScaleWorkload is the name of the scale workload (issue 17): the scale-synth recipe run by the
// train command over synthetic corpora of growing size, each run a child process whose wall
// time, CPU time and peak resident set are measured. It runs only when named in -only.
const ScaleWorkload = "scale"

// ScaleOptions configure RunScale.
type ScaleOptions struct {
	Sizes []int // passages of each corpus, run in ascending order
	// Queries of each synthetic corpus (tools/synth's -queries; 20% test, 10% dev, 70% train).
	Queries int
	Seed    uint64 // of the synthetic corpora (tools/synth's -seed)
	// DataDir holds the corpora, DataDir/synth-<N>, each generated when its corpus.jsonl is
	// absent and reused otherwise.
	DataDir string
	RunsDir string // the runs' output_dir, and their logs scale-synth-<N>.log
	Recipe  string // the recipe file run (recipes/scale-synth.toml)
	// Set overrides keys of the recipe ("train.steps" -> "5"): each must be a line of the file.
	Set   map[string]string
	Train string // the built train command (go build ./cmd/train)
	// MaxRSSKiB is the largest peak RSS allowed at the largest size (4 GiB, the issue's
	// budget at 2M passages).
	MaxRSSKiB int64
	// Tolerance is the slack of the linear-growth test: the growth exponent of a measure
	// (GrowthExponent) may exceed 1 by this much (DefaultScaleTolerance).
	Tolerance float64
	Command   string
	JSON      string // also write the result there ("" for none)
	Out, Log  io.Writer
}

// DefaultScaleOptions: 100,000, 500,000 and 2,000,000 passages of 1,000 queries, seed 42, in
// datasets/, runs in runs/, recipes/scale-synth.toml, at most 4 GiB peak RSS, growth exponents
// at most 1 + DefaultScaleTolerance.
func DefaultScaleOptions() ScaleOptions {
	return ScaleOptions{Sizes: []int{100000, 500000, 2000000}, Queries: 1000, Seed: 42, DataDir: "datasets", RunsDir: "runs",
		Recipe: "recipes/scale-synth.toml", MaxRSSKiB: 4 << 20, Tolerance: DefaultScaleTolerance}
}

// DefaultScaleTolerance is the measurement slack of the growth exponent. The recipe's work is
// linear in the passages (streaming, BM25 postings, tokenizing, encoding and searching every
// passage once) plus a fixed part (training), so its CPU time measures at an exponent of 1 or a
// little below, give or take the noise of a shared machine: three series of 100k / 500k / 2M on
// this 2-core machine (2026-12-01) gave CPU exponents 0.949, 0.976 and 1.000, while one size's
// CPU time moved by up to 18 % between two series (500k: 103 and 122 s) and consecutive ratios
// by 0.4 to 0.5 either side of the passage ratio. 0.05 on the exponent is 16 % over 20 times the
// passages: less than that noise, far below the next complexity class (N log N over 100k..2M
// fits at 1.08).
const DefaultScaleTolerance = 0.05

// GrowthExponent is the least-squares slope of ln(value) on ln(passages) over runs (at least
// two, every value positive): 1 for a measure proportional to the passage count, below 1 when a
// fixed part dominates. ok is false when it cannot be computed.
func GrowthExponent(runs []ScaleRun, value func(ScaleRun) float64) (float64, bool) {
	if len(runs) < 2 {
		return 0, false
	}
	var mx, my float64
	for _, r := range runs {
		if r.Passages <= 0 || value(r) <= 0 {
			return 0, false
		}
		mx += math.Log(float64(r.Passages))
		my += math.Log(value(r))
	}
	mx /= float64(len(runs))
	my /= float64(len(runs))
	var sxy, sxx float64
	for _, r := range runs {
		dx := math.Log(float64(r.Passages)) - mx
		sxy += dx * (math.Log(value(r)) - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// ScaleRun is one size's measurement: the train child's wall-clock and CPU (user + system)
// seconds and its peak resident set (getrusage ru_maxrss of the waited child, KiB), the
// 1-minute load average just before and just after it, and its test nDCG@10.
type ScaleRun struct {
	Passages    int     `json:"passages"`
	WallSeconds float64 `json:"wall_seconds"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	PeakRSSKiB  int64   `json:"peak_rss_kib"`
	LoadStart   float64 `json:"load_start"`
	LoadEnd     float64 `json:"load_end"`
	BM25NDCG10  float64 `json:"bm25_ndcg_10"`
	DenseNDCG10 float64 `json:"dense_ndcg_10"`
	RunDir      string  `json:"run_dir"`
}

// ScaleVerdict says whether time and memory grow at most linearly: OK, or the reasons not.
type ScaleVerdict struct {
	OK        bool            `json:"ok"`
	Reasons   []string        `json:"reasons,omitempty"`
	Exponents []ScaleExponent `json:"exponents,omitempty"`
}

// ScaleExponent is one measure's growth exponent over the sizes (GrowthExponent).
type ScaleExponent struct {
	Measure  string  `json:"measure"`
	Exponent float64 `json:"exponent"`
}

// ScaleResult is what RunScale measured.
type ScaleResult struct {
	Command   string       `json:"command"`
	Recipe    string       `json:"recipe"`
	Set       []string     `json:"set,omitempty"`
	Runs      []ScaleRun   `json:"runs"`
	MaxRSSKiB int64        `json:"max_rss_kib"`
	Tolerance float64      `json:"tolerance"`
	Verdict   ScaleVerdict `json:"verdict"`
}

// scaleMeasures are the measures the verdict judges.
var scaleMeasures = []struct {
	name  string
	value func(ScaleRun) float64
}{
	{"wall time", func(r ScaleRun) float64 { return r.WallSeconds }},
	{"CPU time", func(r ScaleRun) float64 { return r.CPUSeconds }},
	{"peak RSS", func(r ScaleRun) float64 { return float64(r.PeakRSSKiB) }},
}

// ScaleVerdictOf judges runs (ascending passages): the growth exponent (GrowthExponent) of
// their wall times, of their CPU times and of their peak RSS must each be at most 1 +
// tolerance ("grows at most linearly"); and the largest size's peak RSS at most maxRSSKiB (0:
// no cap). Fewer than two runs are judged by the cap alone. The consecutive ratios the table
// prints are not judged one by one: for a linear measure each sits at its passage ratio give
// or take the machine's noise (DefaultScaleTolerance).
func ScaleVerdictOf(runs []ScaleRun, maxRSSKiB int64, tolerance float64) ScaleVerdict {
	var why []string
	v := ScaleVerdict{}
	if len(runs) >= 2 {
		for _, m := range scaleMeasures {
			e, ok := GrowthExponent(runs, m.value)
			if !ok {
				why = append(why, fmt.Sprintf("%s: no growth exponent (a value is not positive)", m.name))
				continue
			}
			v.Exponents = append(v.Exponents, ScaleExponent{Measure: m.name, Exponent: e})
			if e > 1+tolerance+1e-9 { // a measure exactly proportional fits at 1 to rounding
				why = append(why, fmt.Sprintf("%s grows as passages^%.3f from %d to %d passages (limit %.3f)",
					m.name, e, runs[0].Passages, runs[len(runs)-1].Passages, 1+tolerance))
			}
		}
	}
	if n := len(runs); n > 0 && maxRSSKiB > 0 && runs[n-1].PeakRSSKiB > maxRSSKiB {
		why = append(why, fmt.Sprintf("peak RSS at %d passages is %d KiB, above %d KiB", runs[n-1].Passages, runs[n-1].PeakRSSKiB, maxRSSKiB))
	}
	v.OK, v.Reasons = len(why) == 0, why
	return v
}

// RunScale generates the missing corpora, runs the recipe on each size as a child process of
// o.Train (its output in RunsDir/scale-synth-<N>.log), prints the table and the verdict on
// o.Out, and writes o.JSON. It fails when a corpus cannot be made, a key of o.Set is not in
// the recipe, or a run fails (the runs before it are printed); a negative verdict is not an
// error (the result says so).
func RunScale(o ScaleOptions) (*ScaleResult, error) {
	sizes := slices.Clone(o.Sizes)
	slices.Sort(sizes)
	if len(sizes) == 0 || sizes[0] < 1 || len(slices.Compact(slices.Clone(sizes))) != len(sizes) {
		return nil, fmt.Errorf("scale: sizes %v: want distinct positive passage counts", o.Sizes)
	}
	text, err := os.ReadFile(o.Recipe)
	if err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, err
	}
	runsDir, err := filepath.Abs(o.RunsDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runsDir, 0o755); err != nil {
		return nil, err
	}
	res := &ScaleResult{Command: o.Command, Recipe: o.Recipe, MaxRSSKiB: o.MaxRSSKiB, Tolerance: o.Tolerance}
	for k, v := range o.Set {
		res.Set = append(res.Set, k+" = "+v)
	}
	slices.Sort(res.Set)
	var runErr error
	for _, n := range sizes {
		data := filepath.Join(dataDir, fmt.Sprintf("synth-%d", n))
		if err := ensureSynth(data, n, o.Queries, o.Seed, o.Log); err != nil {
			return nil, err
		}
		set := map[string]string{"name": fmt.Sprintf("%q", fmt.Sprintf("scale-synth-%d", n)), "output_dir": fmt.Sprintf("%q", runsDir), "data.dir": fmt.Sprintf("%q", data)}
		for k, v := range o.Set {
			set[k] = v
		}
		rec, err := EditRecipe(string(text), set)
		if err != nil {
			return nil, fmt.Errorf("scale: %s: %w", o.Recipe, err)
		}
		recipe := filepath.Join(runsDir, fmt.Sprintf("scale-synth-%d.toml", n))
		if err := atomicfile.WriteFile(recipe, []byte(rec)); err != nil {
			return nil, err
		}
		r, err := runScaleOne(o.Train, recipe, filepath.Join(runsDir, fmt.Sprintf("scale-synth-%d.log", n)))
		if err != nil {
			runErr = fmt.Errorf("scale: %d passages: %w", n, err)
			break
		}
		r.Passages = n
		fmt.Fprintf(o.Log, "scale: %d passages: %.1f s wall, %.1f s CPU, peak RSS %d MiB\n", n, r.WallSeconds, r.CPUSeconds, r.PeakRSSKiB>>10)
		res.Runs = append(res.Runs, r)
	}
	res.Verdict = ScaleVerdictOf(res.Runs, o.MaxRSSKiB, o.Tolerance)
	if runErr != nil {
		res.Verdict = ScaleVerdict{Reasons: append(res.Verdict.Reasons, runErr.Error())}
	}
	writeScaleTable(o.Out, res)
	if err := writeJSON(o.JSON, res); err != nil {
		return res, err
	}
	return res, runErr
}

// ensureSynth writes the synthetic collection of n passages into dir unless dir/corpus.jsonl
// exists: into dir.tmp first, renamed when complete.
func ensureSynth(dir string, n, queries int, seed uint64, log io.Writer) error {
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err == nil {
		return nil
	}
	start := time.Now()
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	c, err := synth.New(synth.Config{Passages: n, Queries: queries, Seed: seed, Vocab: synth.DefaultVocab, Topics: synth.DefaultTopics})
	if err == nil {
		err = c.Write(tmp)
	}
	if err == nil {
		os.RemoveAll(dir) // a directory without corpus.jsonl is an interrupted earlier attempt
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		return fmt.Errorf("scale: synthetic corpus of %d passages in %s: %w", n, dir, err)
	}
	fmt.Fprintf(log, "scale: wrote %d passages, %d queries into %s (%.1f s)\n", n, queries, dir, time.Since(start).Seconds())
	return nil
}

// runScaleOne runs train -recipe recipe with stdout and stderr in logPath and measures it.
func runScaleOne(train, recipe, logPath string) (ScaleRun, error) {
	var r ScaleRun
	f, err := os.Create(logPath)
	if err != nil {
		return r, err
	}
	defer f.Close()
	var stdout bytes.Buffer
	cmd := exec.Command(train, "-recipe", recipe)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(f, &stdout), f
	r.LoadStart = loadAvg()
	start := time.Now()
	err = cmd.Run()
	r.WallSeconds = time.Since(start).Seconds()
	r.LoadEnd = loadAvg()
	if err != nil {
		return r, fmt.Errorf("%s -recipe %s: %w (output in %s)", train, recipe, err, logPath)
	}
	ps := cmd.ProcessState
	r.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
	r.PeakRSSKiB = childMaxRSSKiB(ps)
	// The train command prints the run directory last.
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			r.RunDir = l
		}
	}
	m, err := experiment.ReadMetrics(r.RunDir)
	if err != nil {
		return r, fmt.Errorf("the run's metrics (output in %s): %w", logPath, err)
	}
	r.BM25NDCG10, r.DenseNDCG10 = m["bm25/nDCG@10"], m["dense/nDCG@10"]
	return r, nil
}

// EditRecipe returns the TOML text with the value of each key of set ("section.key", or "key"
// before the first table) replaced on its line, comments after it dropped. Each key must be
// set on a line of its own in text (one "key = value" line); a key that is not is an error,
// so no override is silently dropped.
func EditRecipe(text string, set map[string]string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	done := map[string]bool{}
	section := ""
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			section = strings.Trim(t, "[] ")
			continue
		}
		k, _, ok := strings.Cut(t, "=")
		if !ok || strings.HasPrefix(t, "#") {
			continue
		}
		key := strings.TrimSpace(k)
		if section != "" {
			key = section + "." + key
		}
		if v, ok := set[key]; ok && !done[key] {
			nl := ""
			if strings.HasSuffix(line, "\n") {
				nl = "\n"
			}
			lines[i] = strings.TrimSpace(k) + " = " + v + nl
			done[key] = true
		}
	}
	var missing []string
	for k := range set {
		if !done[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("keys %v are not set on a line of the recipe (only keys the file sets can be overridden)", missing)
	}
	return strings.Join(lines, ""), nil
}

// writeScaleTable prints the runs and the verdict.
func writeScaleTable(w io.Writer, res *ScaleResult) {
	fmt.Fprintf(w, "scale: %s", res.Recipe)
	if len(res.Set) > 0 {
		fmt.Fprintf(w, " with %s", strings.Join(res.Set, ", "))
	}
	fmt.Fprintf(w, "\n%10s %9s %9s %9s %10s %11s %11s %22s\n", "passages", "wall s", "CPU s", "peak MiB", "B/passage", "load start", "load end", "nDCG@10 bm25 / dense")
	for i, r := range res.Runs {
		fmt.Fprintf(w, "%10d %9.1f %9.1f %9d %10d %11.2f %11.2f %13.4f / %.4f\n", r.Passages, r.WallSeconds, r.CPUSeconds, r.PeakRSSKiB>>10,
			r.PeakRSSKiB*1024/int64(r.Passages), r.LoadStart, r.LoadEnd, r.BM25NDCG10, r.DenseNDCG10)
		if i > 0 {
			p := res.Runs[i-1]
			fmt.Fprintf(w, "%10s %8.2fx %8.2fx %8.2fx   (x%.2f passages)\n", "ratio", r.WallSeconds/p.WallSeconds, r.CPUSeconds/p.CPUSeconds,
				float64(r.PeakRSSKiB)/float64(p.PeakRSSKiB), float64(r.Passages)/float64(p.Passages))
		}
	}
	if len(res.Verdict.Exponents) > 0 {
		var es []string
		for _, e := range res.Verdict.Exponents {
			es = append(es, fmt.Sprintf("%s %.3f", e.Measure, e.Exponent))
		}
		fmt.Fprintf(w, "growth exponents (least-squares slope of ln value on ln passages; 1 = linear): %s\n", strings.Join(es, ", "))
	}
	var busy []string
	for _, r := range res.Runs {
		if r.LoadStart > NoisyLoad || r.LoadEnd > NoisyLoad {
			busy = append(busy, fmt.Sprint(r.Passages))
		}
	}
	if len(busy) > 0 {
		fmt.Fprintf(w, "note: the load average was above %g at the start or end of the runs at %s passages: their wall time is what other processes left of the cores (CPU time and peak RSS depend less on it)\n",
			NoisyLoad, strings.Join(busy, ", "))
	}
	if res.Verdict.OK {
		fmt.Fprintf(w, "verdict: OK: wall time, CPU time and peak RSS grow at most linearly (growth exponents at most 1 + %g), peak RSS at most %d MiB\n", res.Tolerance, res.MaxRSSKiB>>10)
		return
	}
	fmt.Fprintln(w, "verdict: FAIL:")
	for _, r := range res.Verdict.Reasons {
		fmt.Fprintln(w, "  -", r)
	}
}
