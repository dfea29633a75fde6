package retriever

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/curve"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// evalRecipe is the slice recipe evaluated on dev every 5 train steps (logged every 5, so a
// run resumed at an evaluation logs the same losses), with patience 2 and a learning rate high
// enough for the dev curve to turn; pretraining is off.
func evalRecipe(t *testing.T, dir, extraEval string) *configs.Recipe {
	t.Helper()
	text := testkit.RecipeText(t, "slice", map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")})
	for _, r := range [][2]string{
		{"[pretrain]\nsteps = 60", "[pretrain]\nsteps = 0"},
		{"lr = 2e-3", "lr = 1e-2"},
		{"log_every = 10\ncheckpoint_every = 20\n", "log_every = 5\ncheckpoint_every = 20\neval_every = 5\npatience = 2\n"},
	} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("slice recipe lacks %q", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	text += "select_metric = \"nDCG@10\"\n" + extraEval
	path := filepath.Join(dir, "eval.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return testkit.RecipeFile(t, path)
}

// selectLine is a dev evaluation's line of log.jsonl.
type selectLine struct {
	Step     int      `json:"step"`
	NDCG     float64  `json:"dev/nDCG@10"`
	MRR      *float64 `json:"dev/MRR@10"`
	Loss     *float64 `json:"train_loss"`
	Best     bool     `json:"best"`
	NoGain   int      `json:"evals_without_gain"`
	Passages int      `json:"dev_corpus_passages"`
	raw      string
}

func selectLines(t *testing.T, dir string) []selectLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []selectLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Phase string `json:"phase"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		if l.Phase != "select" {
			continue
		}
		var s selectLine
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		s.raw = sc.Text()
		out = append(out, s)
	}
	return out
}

func trainerStep(t *testing.T, ckDir string) checkpoints.TrainerState {
	t.Helper()
	ck, err := checkpoints.LoadDir(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	return ck.Trainer
}

// TestEvalEveryKeepsTheBestAndStopsEarly: a dev evaluation every 5 steps, each logged with its
// metrics and training loss; the best one is the checkpoint tested and exported; patience 2
// stops the phase at the second evaluation in a row without a gain; the curve is a PNG. Then
// the run killed after an evaluation, and the run killed after the stop but before the chosen
// checkpoint was saved, each resume to exactly the uninterrupted run.
func TestEvalEveryKeepsTheBestAndStopsEarly(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := testkit.NewSlice(t)
	rec := evalRecipe(t, dir, "")
	var out strings.Builder
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	lines := selectLines(t, full)
	if len(lines) < 3 {
		t.Fatalf("%d dev evaluations logged, want at least 3:\n%s", len(lines), out.String())
	}
	// The evaluations: every 5 steps; the best flag and counter follow the values.
	best, bestStep, noGain := 0.0, 0, 0
	for i, l := range lines {
		if l.Step != 5*(i+1) {
			t.Errorf("evaluation %d at step %d, want %d", i, l.Step, 5*(i+1))
		}
		if l.MRR == nil || l.Loss == nil || *l.Loss <= 0 {
			t.Errorf("step %d: dev/MRR@10 %v, train_loss %v: want both logged", l.Step, l.MRR, l.Loss)
		}
		gain := bestStep == 0 || l.NDCG > best
		if gain {
			best, bestStep, noGain = l.NDCG, l.Step, 0
		} else {
			noGain++
		}
		if l.Best != gain || l.NoGain != noGain {
			t.Errorf("step %d: best %v, evals_without_gain %d; want %v, %d", l.Step, l.Best, l.NoGain, gain, noGain)
		}
	}
	var curveText []string
	for _, l := range lines {
		curveText = append(curveText, fmt.Sprintf("%d:%.4f", l.Step, l.NDCG))
	}
	t.Logf("dev nDCG@10 by step: %s", strings.Join(curveText, " "))
	last := lines[len(lines)-1]
	stop := last.Step
	if stop >= rec.Train.Steps || last.NoGain != 2 {
		t.Fatalf("the run did not stop early (last evaluation at %d of %d, %d without a gain); pick a recipe whose dev curve turns:\n%s",
			stop, rec.Train.Steps, last.NoGain, out.String())
	}
	if m["train/stopped_early_at"] != float64(stop) || m["select/step"] != float64(bestStep) || m["select/dev/nDCG@10"] != best {
		t.Errorf("metrics: stopped_early_at %v, select/step %v, select/dev/nDCG@10 %v; want %d, %d, %v",
			m["train/stopped_early_at"], m["select/step"], m["select/dev/nDCG@10"], stop, bestStep, best)
	}
	if steps := testkit.LogSteps(t, full); steps[len(steps)-1] != fmt.Sprintf("train/%d", stop) {
		t.Errorf("the last logged training step is %s, want train/%d", steps[len(steps)-1], stop)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("stopping after train step %d", stop)) {
		t.Errorf("output does not report the stop:\n%s", out.String())
	}
	// best/ holds the chosen step; the run's latest (what `train export` and the test
	// evaluation read) is the same weights.
	bestCk, err := checkpoints.Load(filepath.Join(full, BestDir))
	if err != nil {
		t.Fatal(err)
	}
	if ts := bestCk.Trainer; ts.Step != bestStep || ts.BestMetric != best {
		t.Errorf("best/: step %d (%s %v), want %d (%v)", ts.Step, ts.BestMetricName, ts.BestMetric, bestStep, best)
	}
	latest, err := checkpoints.Load(full)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Trainer.Phase != selectedPhase || latest.Trainer.Step != bestStep || filepath.Base(latest.Dir) != fmt.Sprintf("checkpoint-selected-%d", bestStep) {
		t.Errorf("latest is %s (%s step %d), want checkpoint-selected-%d", latest.Dir, latest.Trainer.Phase, latest.Trainer.Step, bestStep)
	}
	for i := range bestCk.Params {
		if !slices.Equal(bestCk.Params[i].Data, latest.Params[i].Data) {
			t.Fatalf("tensor %s of the latest checkpoint differs from best/'s", bestCk.Params[i].Name)
		}
	}
	// The curve.
	b, err := os.ReadFile(filepath.Join(full, CurveFile))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", CurveFile, err)
	}
	if r := img.Bounds(); r.Dx() != curve.Width || r.Dy() != curve.Height {
		t.Errorf("%s is %dx%d, want %dx%d", CurveFile, r.Dx(), r.Dy(), curve.Width, curve.Height)
	}

	same := func(where, resumed string) {
		t.Helper()
		testkit.SameMetrics(t, where, full, resumed, testkit.Quality) // timings aside
		if g, _ := experiment.ReadMetrics(resumed); g["train/stopped_early_at"] != float64(stop) {
			t.Errorf("%strain/stopped_early_at = %v, want %d", where, g["train/stopped_early_at"], stop)
		}
		runs, _ := filepath.Glob(filepath.Join(full, "runs", "*.trec"))
		if len(runs) == 0 {
			t.Fatalf("no TREC runs in %s", full)
		}
		for _, r := range runs {
			testkit.SameFile(t, r, filepath.Join(resumed, "runs", filepath.Base(r)))
		}
		if w, g := testkit.LogSteps(t, full), testkit.LogSteps(t, resumed); !slices.Equal(w, g) {
			t.Errorf("%slog.jsonl (phase, step) lines: resumed %v, uninterrupted %v", where, g, w)
		}
		if w, g := selectLines(t, full), selectLines(t, resumed); len(w) != len(g) {
			t.Errorf("%s%d dev evaluations logged, uninterrupted %d", where, len(g), len(w))
		} else {
			for i := range w {
				if w[i].raw != g[i].raw {
					t.Errorf("%sevaluation %d: resumed %s, uninterrupted %s", where, i, g[i].raw, w[i].raw)
				}
			}
		}
		testkit.SameFile(t, filepath.Join(full, CurveFile), filepath.Join(resumed, CurveFile))
		w, err := checkpoints.Load(filepath.Join(full, BestDir))
		if err != nil {
			t.Fatal(err)
		}
		g, err := checkpoints.Load(filepath.Join(resumed, BestDir))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(w.Dir) != filepath.Base(g.Dir) {
			t.Errorf("%sbest/ holds %s, uninterrupted %s", where, filepath.Base(g.Dir), filepath.Base(w.Dir))
		}
		testkit.SameFile(t, filepath.Join(w.Dir, checkpoints.ModelFile), filepath.Join(g.Dir, checkpoints.ModelFile))
	}

	// Killed after the evaluation before the stop (one without a gain so far): interrupted two
	// steps later, with latest put back on the evaluation's checkpoint and a line logged after it.
	kill := stop - 5
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "train", InterruptAt: kill + 1})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	ckName := fmt.Sprintf("checkpoint-train-%d", kill)
	if ts := trainerStep(t, filepath.Join(broken, ckName)); ts.Counters[experiment.CounterNoGain] != 1 {
		t.Fatalf("%s records %d evaluations without a gain, want 1", ckName, ts.Counters[experiment.CounterNoGain])
	}
	os.WriteFile(filepath.Join(broken, checkpoints.LatestFile), []byte(ckName+"\n"), 0o644)
	f, _ := os.OpenFile(filepath.Join(broken, experiment.LogFile), os.O_WRONLY|os.O_APPEND, 0)
	fmt.Fprintf(f, "{\"phase\":\"train\",\"step\":%d,\"loss\":1}\n", kill+5)
	f.Close()
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	same("killed after an evaluation: ", resumed)

	// Killed after the stop's checkpoint, before the chosen one: a copy of the finished run with
	// latest put back on the train checkpoint of the stop and no results.
	copyDir := filepath.Join(dir, "stopped")
	if err := os.CopyFS(copyDir, os.DirFS(full)); err != nil {
		t.Fatal(err)
	}
	stopCk := fmt.Sprintf("checkpoint-train-%d", stop)
	if ts := trainerStep(t, filepath.Join(copyDir, stopCk)); ts.Counters[experiment.CounterStopped] != stop {
		t.Fatalf("%s records the stop at %d, want %d", stopCk, ts.Counters[experiment.CounterStopped], stop)
	}
	os.WriteFile(filepath.Join(copyDir, checkpoints.LatestFile), []byte(stopCk+"\n"), 0o644)
	os.Remove(filepath.Join(copyDir, experiment.MetricsFile))
	os.Remove(filepath.Join(copyDir, CurveFile))
	trec, _ := filepath.Glob(filepath.Join(copyDir, "runs", "*.trec"))
	for _, f := range trec {
		os.Remove(f)
	}
	out.Reset()
	again, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: copyDir})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "train: ") {
		t.Errorf("the stopped run trained again:\n%s", out.String())
	}
	same("killed after the stop: ", again)

	// Killed after the chosen checkpoint, before metrics.json: it records the stop too.
	if err := os.Remove(filepath.Join(copyDir, experiment.MetricsFile)); err != nil {
		t.Fatal(err)
	}
	if ck, err := checkpoints.Load(copyDir); err != nil || ck.Trainer.Phase != selectedPhase {
		t.Fatalf("latest of the resumed run: %v, %v", ck, err)
	}
	if _, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, ResumeDir: copyDir}); err != nil {
		t.Fatal(err)
	}
	same("killed before metrics.json: ", copyDir)
}

// TestDevSample: every judged passage and n others, ascending, the same for the same seed;
// the whole corpus when fewer than n others remain.
func TestDevSample(t *testing.T) {
	var ids []string
	for i := range 100 {
		ids = append(ids, fmt.Sprintf("d%d", i))
	}
	qrels := map[string]map[string]int{"q1": {"d3": 1, "d50": 0}, "q2": {"d97": 2, "d3": 1}}
	got := DevSample(ids, qrels, 10, 7)
	if len(got) != 13 || !slices.IsSorted(got) {
		t.Fatalf("sample %v: want 13 ascending indices", got)
	}
	for _, j := range []int{3, 50, 97} {
		if !slices.Contains(got, j) {
			t.Errorf("sample %v lacks judged passage %d", got, j)
		}
	}
	if again := DevSample(ids, qrels, 10, 7); !slices.Equal(got, again) {
		t.Errorf("same seed, samples %v and %v", got, again)
	}
	if other := DevSample(ids, qrels, 10, 8); slices.Equal(got, other) {
		t.Errorf("seeds 7 and 8 drew the same sample %v", got)
	}
	if all := DevSample(ids, qrels, 500, 7); len(all) != 100 {
		t.Errorf("n above the corpus: %d passages, want all 100", len(all))
	}
}

// TestDevCorpusSampleIsReported: a run with eval.dev_corpus_sample ranks the dev queries
// against the sample (logged and in metrics.json) and still evaluates the test split on the
// whole corpus: its test rankings list passages outside the sample.
func TestDevCorpusSampleIsReported(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := testkit.NewSlice(t)
	rec := evalRecipe(t, dir, "dev_corpus_sample = 20\n")
	rec.Train.Steps, rec.Train.Patience = 10, 0
	var out strings.Builder
	run, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m, _ := experiment.ReadMetrics(run)
	n := m["select/dev_corpus_passages"]
	if n <= 20 || n >= 200 {
		t.Fatalf("select/dev_corpus_passages = %v, want the judged passages plus 20, below the corpus's 200", n)
	}
	for _, l := range selectLines(t, run) {
		if l.Passages != int(n) {
			t.Errorf("step %d: dev_corpus_passages %d, want %v", l.Step, l.Passages, n)
		}
	}
	if !strings.Contains(out.String(), fmt.Sprintf("ranked against %d of the 200 passages", int(n))) {
		t.Errorf("output does not report the sample:\n%s", out.String())
	}
	b, err := os.ReadFile(filepath.Join(run, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		docs[strings.Fields(line)[2]] = true
	}
	if len(docs) <= int(n) {
		t.Errorf("the test rankings list %d passages, no more than the %v of the dev sample", len(docs), n)
	}
}
