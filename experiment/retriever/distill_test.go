package retriever

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/reranker" // the teacher is a reranker run
)

// trainTeacher trains the reranker test recipe's pairwise cross-encoder on the slice in dir and
// returns its model directory (<run>/reranker-pairwise).
func trainTeacher(t *testing.T, dir string, steps int) string {
	t.Helper()
	vars := map[string]string{"OUT": filepath.Join(dir, "teacher-runs"), "DATA": filepath.Join(dir, "data")}
	rec := testkit.Recipe(t, "rerank-slice", filepath.Join(dir, "teacher.toml"), vars, "")
	reranker.Of(rec).Losses, rec.Train.Steps = []string{"pairwise"}, steps
	run, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(run, "reranker-pairwise")
}

// losses returns the losses of log.jsonl's lines of phase, in order.
func phaseLosses(t *testing.T, runDir, phase string) []float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Phase string   `json:"phase"`
			Loss  *float64 `json:"loss"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		if l.Phase == phase && l.Loss != nil {
			out = append(out, *l.Loss)
		}
	}
	return out
}

func runOut(t *testing.T, rec *configs.Recipe, o experiment.Options) (string, string, error) {
	t.Helper()
	var out strings.Builder
	o.Out, o.Progress = &out, io.Discard
	dir, err := experiment.Run(context.Background(), rec, o)
	return dir, out.String(), err
}

// TestMarginMSEDistillsTheTeacher: a bag-of-words student trained from scratch with margin_mse
// against a reranker of the slice. The teacher's scores of the training pairs are computed once
// (teacher_scores.tsv; "N scored, 0 cached"), the loss falls, and the student ranks the test
// queries far better than its start (the same recipe with no training step). A second run
// reading the first one's file (loss.teacher_cache) scores nothing and ends with the same
// metrics; a cache of another teacher hash is refused. An interrupted run resumes from the
// run directory's cache ("0 scored") to the uninterrupted run's metrics, TREC files and log.
func TestMarginMSEDistillsTheTeacher(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := testkit.NewSlice(t)
	teacher := trainTeacher(t, dir, 60)
	keys := fmt.Sprintf("name = %q\nteacher = %q\nteacher_temperature = 0.5\n", "margin_mse", teacher)
	// From scratch (no cropping phase), evaluated on the test queries and on the training
	// queries, whose pairs the teacher scored.
	noPretrain := []string{"[pretrain]\nsteps = 60", "[pretrain]\nsteps = 0", "[eval]\n", "[eval]\nsplits = [\"test\", \"train\"]\n"}
	rec := testkit.RecipeFile(t, lossRecipe(t, dir, "mmse", keys, noPretrain...))

	first, out, err := runOut(t, rec, experiment.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var pairs, scored, cached int
	line := out[strings.Index(out, "training pairs")-40:]
	line = line[strings.Index(line, ": ")+2:]
	if _, err := fmt.Sscanf(line, "%d training pairs, %d scored, %d cached", &pairs, &scored, &cached); err != nil || pairs == 0 || scored != pairs || cached != 0 {
		t.Fatalf("teacher counts %d pairs, %d scored, %d cached (%v) in:\n%s", pairs, scored, cached, err, out)
	}
	if _, err := os.Stat(filepath.Join(first, TeacherScoresFile)); err != nil {
		t.Fatal(err)
	}
	ls := phaseLosses(t, first, "train")
	if len(ls) < 2 || ls[len(ls)-1] >= ls[0] {
		t.Errorf("margin_mse losses %v: the last is not below the first", ls)
	}
	start := *rec
	start.Train.Steps = 0
	startDir, _, err := runOut(t, &start, experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := experiment.ReadMetrics(first)
	m0, _ := experiment.ReadMetrics(startDir)
	const k = "dense.train/nDCG@10"
	t.Logf("teacher pairs %d; losses %v; train nDCG@10 start %.4f distilled %.4f; test %.4f -> %.4f", pairs, ls, m0[k], m[k], m0["dense/nDCG@10"], m["dense/nDCG@10"])
	if m[k] < m0[k]+0.05 {
		t.Errorf("distilled %s %.4f does not beat the start's %.4f by 0.05", k, m[k], m0[k])
	}

	// A rerun naming the first run's cache: nothing scored, the same numbers.
	cache := filepath.Join(first, TeacherScoresFile)
	rerun := testkit.RecipeFile(t, lossRecipe(t, dir, "mmse2", keys+fmt.Sprintf("teacher_cache = %q\n", cache), noPretrain...))
	second, out2, err := runOut(t, rerun, experiment.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out2)
	}
	if want := fmt.Sprintf("%d training pairs, 0 scored, %d cached", pairs, pairs); !strings.Contains(out2, want) {
		t.Errorf("rerun output lacks %q:\n%s", want, out2)
	}
	testkit.SameMetrics(t, "rerun: ", first, second, testkit.Quality)

	// Another teacher's cache is refused, naming the file.
	b, _ := os.ReadFile(cache)
	other := filepath.Join(dir, "other.tsv")
	_, h, _ := strings.Cut(strings.SplitN(string(b), "; ", 3)[1], " ") // teacher_sha256 <hex>
	os.WriteFile(other, []byte(strings.Replace(string(b), h, strings.Repeat("0", len(h)), 1)), 0o644)
	bad := testkit.RecipeFile(t, lossRecipe(t, dir, "mmse3", keys+fmt.Sprintf("teacher_cache = %q\n", other), noPretrain...))
	if _, out3, err := runOut(t, bad, experiment.Options{}); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a cache of another teacher: err = %v\n%s", err, out3)
	}

	// Interrupted and resumed: the cache is read back and the run ends as the uninterrupted one.
	broken, _, err := runOut(t, rec, experiment.Options{InterruptPhase: "train", InterruptAt: 33})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	resumed, out4, err := runOut(t, rec, experiment.Options{ResumeDir: broken})
	if err != nil {
		t.Fatalf("%v\n%s", err, out4)
	}
	if want := fmt.Sprintf("%d training pairs, 0 scored, %d cached", pairs, pairs); !strings.Contains(out4, want) {
		t.Errorf("resumed output lacks %q:\n%s", want, out4)
	}
	testkit.SameMetrics(t, "resume: ", first, resumed, testkit.Quality)
	runs, _ := filepath.Glob(filepath.Join(first, "runs", "*.trec"))
	if len(runs) == 0 {
		t.Fatal("no TREC runs")
	}
	for _, r := range runs {
		testkit.SameFile(t, r, filepath.Join(resumed, "runs", filepath.Base(r)))
	}
	if w, g := testkit.LogSteps(t, first), testkit.LogSteps(t, resumed); !slices.Equal(w, g) {
		t.Errorf("log.jsonl (phase, step) lines: resumed %v, uninterrupted %v", g, w)
	}
}

// TestKLDistillTrains: kl_distill over each query's positive and two hard negatives trains a
// student whose loss falls and whose test ranking beats random.
func TestKLDistillTrains(t *testing.T) {
	testkit.SkipUnderRace(t)
	dir := testkit.NewSlice(t)
	teacher := trainTeacher(t, dir, 60)
	keys := fmt.Sprintf("name = %q\nteacher = %q\n", "kl_distill", teacher)
	rec := testkit.RecipeFile(t, lossRecipe(t, dir, "kl", keys, "[pretrain]\nsteps = 60", "[pretrain]\nsteps = 0",
		"[eval]\n", "[sampler]\nhard_negatives = 2\n[eval]\n"))
	run, out, err := runOut(t, rec, experiment.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ls := phaseLosses(t, run, "train")
	m, _ := experiment.ReadMetrics(run)
	base := randomBaseline(t, filepath.Join(dir, "data"))
	t.Logf("kl_distill losses %v; nDCG@10 %.4f, random %.4f", ls, m["dense/nDCG@10"], base)
	if len(ls) < 2 || ls[len(ls)-1] >= ls[0] {
		t.Errorf("kl_distill losses %v: the last is not below the first", ls)
	}
	if m["dense/nDCG@10"] < 2*base+0.05 {
		t.Errorf("nDCG@10 %.4f does not beat the random ranking's %.4f", m["dense/nDCG@10"], base)
	}

	// loss.teacher_bm25_weight: the same pairs read from the first run's cache (the cache holds
	// the cross-encoder's scores alone), BM25 added to the teacher's scores, so the losses move.
	bm := keys + fmt.Sprintf("teacher_cache = %q\nteacher_bm25_weight = 0.5\n", filepath.Join(run, TeacherScoresFile))
	rec2 := testkit.RecipeFile(t, lossRecipe(t, dir, "klbm25", bm, "[pretrain]\nsteps = 60", "[pretrain]\nsteps = 0",
		"[eval]\n", "[sampler]\nhard_negatives = 2\n[eval]\n"))
	run2, out2, err := runOut(t, rec2, experiment.Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out2)
	}
	for _, want := range []string{" 0 scored, ", "teacher: score = cross-encoder + 0.5 x BM25 (loss.teacher_bm25_weight)"} {
		if !strings.Contains(out2, want) {
			t.Errorf("teacher_bm25_weight run: output lacks %q:\n%s", want, out2)
		}
	}
	if ls2 := phaseLosses(t, run2, "train"); len(ls2) != len(ls) || ls2[0] == ls[0] {
		t.Errorf("teacher_bm25_weight 0.5: losses %v, the cross-encoder alone's %v: the first should differ", ls2, ls)
	}
}
