package splade_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	_ "github.com/ragtrain/ragtrain/experiment/reranker" // the teacher is a reranker run
	"github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/experiment/splade"
)

// sliceTeacher trains the reranker test recipe's pairwise cross-encoder (a 1-layer transformer)
// for steps steps on a Cranfield slice of its own and returns its model directory
// (<run>/reranker-pairwise), a loss.teacher.
func sliceTeacher(t *testing.T, steps int) string {
	t.Helper()
	dir := testkit.NewSlice(t)
	text := testkit.RecipeText(t, "rerank-slice", map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")})
	text = strings.NewReplacer(`losses = ["pairwise", "listwise", "pointwise"]`, `losses = ["pairwise"]`, "steps = 120", fmt.Sprintf("steps = %d", steps)).Replace(text)
	run, err := experiment.Run(context.Background(), testkit.WriteRecipe(t, dir, "teacher.toml", text), experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(run, "reranker-pairwise")
}

// distillRecipe is tinyRecipe with loss.name = loss from teacher, hard negatives per query
// (the best-ranked: negative_strategy "top"), lr 1e-2 and train.steps = steps (a checkpoint
// every half), plus the [loss] keys keys; its training split is cut to the first 4 judged pairs
// of distinct queries, so that every step trains on the same batch of B = 4 (in another order)
// and the loss falls step after step.
func distillRecipe(t *testing.T, loss, teacher string, negatives, steps int, keys string) *configs.Recipe {
	rec := tinyRecipe(t, "", `name = "splade"`, fmt.Sprintf("name = %q\nteacher = %q\n%s", loss, teacher, keys),
		"hard_negatives = 1", fmt.Sprintf("hard_negatives = %d\nnegative_strategy = \"top\"", negatives),
		"lr = 1e-3", "lr = 1e-2", "steps = 8", fmt.Sprintf("steps = %d", steps), "checkpoint_every = 4", fmt.Sprintf("checkpoint_every = %d", steps/2))
	path := filepath.Join(rec.Data.Dir, "qrels", "train.tsv")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	keep, seen := lines[:1], map[string]bool{} // the header
	for _, l := range lines[1:] {
		if q, _, _ := strings.Cut(l, "\t"); q != "" && !seen[q] && len(seen) < 4 {
			seen[q] = true
			keep = append(keep, l)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("%s: %d queries", path, len(seen))
	}
	if err := os.WriteFile(path, []byte(strings.Join(keep, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return rec
}

// logLines returns log.jsonl's training lines of run as maps without their timing fields, and
// their losses.
func logLines(t *testing.T, run string) ([]map[string]any, []float64) {
	t.Helper()
	f, err := os.Open(filepath.Join(run, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	var ls []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log.jsonl: %v", err)
		}
		for k := range l {
			if strings.Contains(k, "second") || strings.HasSuffix(k, "_ms") || strings.Contains(k, "time") || strings.Contains(k, "per_sec") {
				delete(l, k)
			}
		}
		if v, ok := l["loss"].(float64); ok && l["phase"] == splade.PhaseName {
			ls = append(ls, v)
		}
		lines = append(lines, l)
	}
	return lines, ls
}

var teacherCounts = regexp.MustCompile(`: (\d+) training pairs, (\d+) scored, (\d+) cached`)

// counts returns the teacher's line's pairs, scored and cached counts of a run's output.
func counts(t *testing.T, out string) [3]int {
	t.Helper()
	m := teacherCounts.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no teacher counts in:\n%s", out)
	}
	var c [3]int
	for i := range c {
		c[i], _ = strconv.Atoi(m[i+1])
	}
	return c
}

// TestSpladeDistillsTheTeacher: the tiny SPLADE recipe with splade_kl_distill (two hard
// negatives per query) from a reranker of the slice scores the training pairs once, writes the
// teacher cache, and its loss falls; interrupted at step 5 and resumed, it reads every pair
// back from the run's cache ("0 scored") and ends with the uninterrupted run's checkpoint bit
// for bit, its log.jsonl (timings aside), metrics, TREC runs, index and cache. A
// splade_margin_mse run (one hard negative) reading the first run's cache
// (loss.teacher_cache) scores only the pairs the cache lacks, and trains.
func TestSpladeDistillsTheTeacher(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	teacher := sliceTeacher(t, 30)
	const steps = 24
	rec := distillRecipe(t, "splade_kl_distill", teacher, 2, steps, "teacher_temperature = 0.5\n")
	var b strings.Builder
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &b, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	c := counts(t, b.String())
	if c[0] == 0 || c[1] != c[0] || c[2] != 0 {
		t.Errorf("the first run's teacher: %d pairs, %d scored, %d cached; want all scored", c[0], c[1], c[2])
	}
	cache := filepath.Join(full, retriever.TeacherScoresFile)
	if st, err := os.Stat(cache); err != nil || st.Size() == 0 {
		t.Fatalf("teacher cache: %v", err)
	}
	lines, ls := logLines(t, full)
	if len(ls) != steps/2 || !falling(ls, 0.5) {
		t.Errorf("splade_kl_distill losses %v: want %d (every 2 steps), falling", ls, steps/2)
	}
	t.Logf("splade_kl_distill: %d teacher pairs; losses %v", c[0], ls)

	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard, InterruptPhase: splade.PhaseName, InterruptAt: 5})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	b.Reset()
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &b, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if c2 := counts(t, b.String()); c2 != [3]int{c[0], 0, c[0]} || !strings.Contains(b.String(), "resume: ") {
		t.Errorf("the resumed run's teacher: %v, want %d pairs all cached; output:\n%s", c2, c[0], b.String())
	}
	testkit.SameCheckpoint(t, "", full, resumed, steps)
	testkit.SameMetrics(t, "", full, resumed, untimed)
	if got, _ := logLines(t, resumed); !reflect.DeepEqual(got, lines) {
		t.Errorf("log.jsonl resumed:\n%v\nuninterrupted:\n%v", got, lines)
	}
	for _, f := range []string{retriever.TeacherScoresFile, splade.IndexDir + "/postings.bin", "runs/test.splade.trec", "runs/test.splade_zeroshot.trec", "runs/test.bm25.trec"} {
		testkit.SameFile(t, filepath.Join(full, f), filepath.Join(resumed, f))
	}

	// splade_margin_mse over one hard negative, the first run's cache read first (its pairs
	// are a subset: nothing is scored); then the same with the labels' InfoNCE term, whose loss
	// is larger by about that term (~log 8 for 8 candidates); then with BM25 added to the
	// teacher's scores too (the shipped distillation recipe's keys).
	var mmLosses [3][]float64
	for i, keys := range []string{"", "infonce_weight = 1.0\n", "infonce_weight = 1.0\nteacher_bm25_weight = 0.5\n"} {
		mm := distillRecipe(t, "splade_margin_mse", teacher, 1, 8, fmt.Sprintf("teacher_cache = %q\n%s", cache, keys))
		b.Reset()
		run, err := experiment.Run(context.Background(), mm, experiment.Options{Out: &b, Progress: io.Discard})
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		if c3 := counts(t, b.String()); c3[0] == 0 || c3[1] != 0 || c3[2] != c3[0] {
			t.Errorf("splade_margin_mse with the cache: %d pairs, %d scored, %d cached; want all read from the cache", c3[0], c3[1], c3[2])
		}
		if i == 2 && (!strings.Contains(b.String(), "infonce_weight 1") || !strings.Contains(b.String(), "cross-encoder + 0.5 x BM25")) {
			t.Errorf("the run with infonce_weight and teacher_bm25_weight does not say so:\n%s", b.String())
		}
		_, mmLosses[i] = logLines(t, run)
		if ls := mmLosses[i]; len(ls) != 4 || !falling(ls, []float64{0.5, 0.8, 0.8}[i]) {
			t.Errorf("splade_margin_mse (%q) losses %v: want 4, falling", keys, ls)
		}
	}
	if d := mmLosses[1][0] - mmLosses[0][0]; !(d > 1 && d < 2.5) {
		t.Errorf("splade_margin_mse + InfoNCE first loss %v, alone %v: want about log 8 = 2.08 more", mmLosses[1][0], mmLosses[0][0])
	}
	t.Logf("splade_margin_mse: losses %v; with infonce_weight 1 %v; and teacher_bm25_weight 0.5 %v", mmLosses[0], mmLosses[1], mmLosses[2])
}

// TestSpladeDistillRecipeErrors: a distillation recipe of the splade kind is refused, naming the
// key, without a teacher, with too few (or, for splade_margin_mse, too many) hard negatives, or
// with cosine similarity; the teacher's keys are refused with the splade loss; the default
// recipe (loss splade) still loads.
func TestSpladeDistillRecipeErrors(t *testing.T) {
	rec := tinyRecipe(t, "")
	if rec.Loss.Name != "splade" || rec.Loss.Teacher != "" {
		t.Fatalf("the tiny recipe: loss %q, teacher %q", rec.Loss.Name, rec.Loss.Teacher)
	}
	dir := filepath.Dir(rec.Data.Dir)
	for _, c := range []struct{ name, old, new, key, want string }{
		{"no teacher", `name = "splade"`, `name = "splade_kl_distill"`, "loss.teacher", "set loss.teacher"},
		{"teacher missing", `name = "splade"`, `name = "splade_kl_distill"` + "\nteacher = \"no-such-teacher\"", "loss.teacher", "no such file"},
		{"teacher with splade", `name = "splade"`, `name = "splade"` + "\nteacher = \".\"", "loss.teacher", "read only by the distillation losses"},
		{"infonce_weight with splade", `name = "splade"`, `name = "splade"` + "\ninfonce_weight = 1.0", "loss.infonce_weight", "read only by the distillation losses"},
		{"cosine", `similarity = "dot"`, `similarity = "cosine"`, "loss.similarity", "dot product"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(recipeText(t, rec), c.old, c.new, 1)
			r, err := testkit.LoadText(t, filepath.Join(dir, c.name+".toml"), text)
			if err == nil && c.key == "loss.similarity" {
				_, err = experiment.Run(context.Background(), r, experiment.Options{Out: io.Discard, Progress: io.Discard})
			}
			if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one naming %s and saying %q", err, c.key, c.want)
			}
		})
	}
	// the hard negatives each loss compares
	for _, c := range []struct {
		loss      string
		negatives int
		want      string
	}{{"splade_kl_distill", 0, "sampler.hard_negatives >= 1, got 0"}, {"splade_margin_mse", 2, "sampler.hard_negatives = 1, got 2"}, {"splade_margin_mse", 0, "sampler.hard_negatives = 1, got 0"}} {
		text := strings.NewReplacer(`name = "splade"`, fmt.Sprintf("name = %q\nteacher = %q", c.loss, dir), "hard_negatives = 1", fmt.Sprintf("hard_negatives = %d", c.negatives)).Replace(recipeText(t, rec))
		if _, err := testkit.LoadText(t, filepath.Join(dir, fmt.Sprintf("%s-%d.toml", c.loss, c.negatives)), text); err == nil || !strings.Contains(err.Error(), "loss.name") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %d hard negatives: err = %v, want one saying %q", c.loss, c.negatives, err, c.want)
		}
	}
}

// falling reports whether each loss is below the first and the last below frac times it.
func falling(ls []float64, frac float64) bool {
	for _, l := range ls[1:] {
		if !(l < ls[0]) {
			return false
		}
	}
	return len(ls) > 1 && ls[len(ls)-1] < frac*ls[0]
}

// recipeText is the text of rec's file.
func recipeText(t *testing.T, rec *configs.Recipe) string {
	t.Helper()
	b, err := os.ReadFile(rec.Path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
