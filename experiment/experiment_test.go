package experiment

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/index"
)

// sliceCranfield writes a 200-passage slice of the shipped Cranfield collection into dir:
// every passage judged relevant to the first train and test queries that fit, then others
// in file order, with the qrels restricted to the slice.
func sliceCranfield(t *testing.T, dir string, size int) {
	t.Helper()
	src := filepath.Join("..", "datasets", "cranfield")
	ds, err := data.Load(src, "train", "test")
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{}
	add := func(q data.Qrels) {
		for _, qid := range q.QueryIDs() {
			rel := q.Relevant(qid)
			if len(keep)+len(rel) > size*2/3 {
				continue
			}
			for _, d := range rel {
				keep[d] = true
			}
		}
	}
	add(ds.Qrels["train"])
	add(ds.Qrels["test"])
	for _, id := range ds.Corpus.IDs {
		if len(keep) >= size {
			break
		}
		keep[id] = true
	}
	copyLines(t, filepath.Join(src, "corpus.jsonl"), filepath.Join(dir, "corpus.jsonl"), func(line string) bool {
		var r struct {
			ID string `json:"_id"`
		}
		json.Unmarshal([]byte(line), &r)
		return keep[r.ID]
	})
	copyLines(t, filepath.Join(src, "queries.jsonl"), filepath.Join(dir, "queries.jsonl"), func(string) bool { return true })
	os.MkdirAll(filepath.Join(dir, "qrels"), 0o755)
	for _, split := range []string{"train", "dev", "test"} {
		first := true
		copyLines(t, filepath.Join(src, "qrels", split+".tsv"), filepath.Join(dir, "qrels", split+".tsv"), func(line string) bool {
			if first {
				first = false
				return true
			}
			return keep[strings.Split(line, "\t")[1]]
		})
	}
}

func copyLines(t *testing.T, from, to string, keep func(string) bool) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var b strings.Builder
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if keep(sc.Text()) {
			b.WriteString(sc.Text() + "\n")
		}
	}
	if err := os.WriteFile(to, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// smallRecipe writes a recipe over the slice in dir and loads it.
func smallRecipe(t *testing.T, dir, extra string) *configs.Recipe {
	t.Helper()
	text := fmt.Sprintf(`kind = "retriever"
name = "slice"
seed = 3
output_dir = %q
[data]
dir = %q
[tokenizer]
train = true
vocab_size = 2000
max_length = 48
[model]
encoder = "bow"
hidden = 64
[loss]
similarity = "cosine"
temperature = 0.05
[pretrain]
steps = 60
batch_size = 32
[train]
steps = 60
batch_size = 16
lr = 2e-3
warmup_steps = 5
log_every = 10
checkpoint_every = 20
[eval]
depth = 200
metrics = ["nDCG@10", "MRR@10", "Recall@100", "MAP"]
`, filepath.Join(dir, "runs"), filepath.Join(dir, "data")) + extra
	p := filepath.Join(dir, "recipe.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := configs.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func newSlice(t *testing.T) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	sliceCranfield(t, filepath.Join(dir, "data"), 200)
	return dir
}

// randomBaseline is the mean nDCG@10 of seeded random orderings of the slice's corpus.
func randomBaseline(t *testing.T, dataDir string) float64 {
	ds, err := data.Load(dataDir, "test")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	const draws = 20
	for s := range draws {
		r := rand.New(rand.NewPCG(uint64(s), 9))
		run := eval.Run{}
		for _, q := range ds.Qrels["test"].QueryIDs() {
			perm := r.Perm(ds.Corpus.Len())
			hits := make([]index.Hit, len(perm))
			for i, d := range perm {
				hits[i] = index.Hit{DocID: ds.Corpus.IDs[d], Score: float64(len(perm) - i)}
			}
			run[q] = hits
		}
		m, err := eval.Evaluate(run, ds.Qrels["test"], []string{"nDCG@10"})
		if err != nil {
			t.Fatal(err)
		}
		sum += m["nDCG@10"]
	}
	return sum / draws
}

func TestRetrieverSliceBeatsRandomAndWritesOutputs(t *testing.T) {
	dir := newSlice(t)
	rec := smallRecipe(t, dir, "")
	runDir, err := Run(context.Background(), rec, Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ReadMetrics(runDir)
	if err != nil {
		t.Fatal(err)
	}
	base := randomBaseline(t, filepath.Join(dir, "data"))
	t.Logf("random nDCG@10 %.4f; bm25 %.4f dense %.4f rrf %.4f", base, m["bm25/nDCG@10"], m["dense/nDCG@10"], m["rrf/nDCG@10"])
	if m["dense/nDCG@10"] < 2*base+0.05 {
		t.Errorf("dense nDCG@10 %.4f does not beat the random ranking's %.4f", m["dense/nDCG@10"], base)
	}
	for _, f := range []string{ResolvedRecipeFile, LogFile, MetricsFile, "tokenizer.json", "latest",
		"runs/test.bm25.trec", "runs/test.dense.trec", "runs/test.rrf.trec"} {
		if _, err := os.Stat(filepath.Join(runDir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	for _, k := range []string{"bm25/MRR@10", "dense/Recall@100", "rrf/MAP", "train/seconds", "train/examples_per_second"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %q", k)
		}
	}
	// The TREC run on disk is the one evaluated.
	run, err := eval.ReadTREC(filepath.Join(runDir, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	ds, _ := data.Load(filepath.Join(dir, "data"), "test")
	again, _ := eval.Evaluate(run, ds.Qrels["test"], []string{"nDCG@10"})
	if d := again["nDCG@10"] - m["dense/nDCG@10"]; d > 1e-9 || d < -1e-9 {
		t.Errorf("TREC file scores %.6f, metrics.json %.6f", again["nDCG@10"], m["dense/nDCG@10"])
	}
}

// quality drops the timing entries of metrics.json, which differ from run to run.
func quality(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, "train/") || strings.Contains(k, "per_second") {
			continue
		}
		out[k] = v
	}
	return out
}

func TestResumeEndsWithTheSameMetrics(t *testing.T) {
	for _, phase := range []string{"pretrain", "train"} {
		t.Run(phase, func(t *testing.T) {
			dir := newSlice(t)
			rec := smallRecipe(t, dir, "")
			full, err := Run(context.Background(), rec, Options{Progress: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			// Interrupt at step 33 (after the checkpoint at 20 and not on a multiple of 20),
			// as SIGINT would: the loop checkpoints the 33 completed steps and stops.
			broken, err := Run(context.Background(), rec, Options{Progress: io.Discard, interruptPhase: phase, interruptAt: 33})
			if err == nil || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("interrupted run: err = %v", err)
			}
			if _, err := os.Stat(filepath.Join(broken, MetricsFile)); err == nil {
				t.Fatal("an interrupted run wrote metrics.json")
			}
			// A run killed later would have logged steps after its checkpoint, replayed on resume.
			logPath := filepath.Join(broken, LogFile)
			f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(f, "{\"phase\":%q,\"step\":40,\"loss\":1}\n", phase)
			f.Close()
			resumed, err := Run(context.Background(), rec, Options{Progress: io.Discard, ResumeDir: broken})
			if err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(resumed, MetricsFile))
			again, err := Run(context.Background(), rec, Options{Progress: io.Discard, ResumeDir: resumed})
			after, _ := os.ReadFile(filepath.Join(resumed, MetricsFile))
			if err != nil || again != resumed || string(before) != string(after) {
				t.Fatalf("resuming a finished run: err %v, dir %s, metrics.json changed: %v", err, again, string(before) != string(after))
			}
			want, _ := ReadMetrics(full)
			got, _ := ReadMetrics(resumed)
			if got["train/seconds"] <= 0 || got["train/examples_per_second"] <= 0 {
				t.Errorf("resumed run: train/seconds %v, train/examples_per_second %v", got["train/seconds"], got["train/examples_per_second"])
			}
			want, got = quality(want), quality(got)
			if len(want) == 0 || len(want) != len(got) {
				t.Fatalf("metrics: %v vs %v", want, got)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: resumed %v, uninterrupted %v", k, got[k], v)
				}
			}
			// The log was cut back to the checkpoint: every (phase, step) line once, as in
			// the uninterrupted run.
			if w, g := logSteps(t, full), logSteps(t, resumed); !slices.Equal(w, g) {
				t.Errorf("log.jsonl (phase, step) lines: resumed %v, uninterrupted %v", g, w)
			}
		})
	}
}

// logSteps lists the (phase, step) of log.jsonl's training lines, in order.
func logSteps(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Phase string   `json:"phase"`
			Step  int      `json:"step"`
			Loss  *float64 `json:"loss"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if l.Loss != nil {
			out = append(out, fmt.Sprintf("%s/%d", l.Phase, l.Step))
		}
	}
	return out
}

// TestResumeBeforeTheFirstCheckpoint: a run killed before its first checkpoint (simulated by
// removing the checkpoint its interruption wrote) resumes by starting its first phase again,
// and ends as the uninterrupted run does.
func TestResumeBeforeTheFirstCheckpoint(t *testing.T) {
	dir := newSlice(t)
	rec := smallRecipe(t, dir, "")
	full, err := Run(context.Background(), rec, Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := Run(context.Background(), rec, Options{Progress: io.Discard, interruptPhase: "pretrain", interruptAt: 15})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	entries, _ := os.ReadDir(broken)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "checkpoint") || e.Name() == "latest" {
			os.RemoveAll(filepath.Join(broken, e.Name()))
		}
	}
	var out strings.Builder
	resumed, err := Run(context.Background(), rec, Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no checkpoint yet; starting from the first phase") {
		t.Errorf("output does not say the run starts again:\n%s", out.String())
	}
	want, _ := ReadMetrics(full)
	got, _ := ReadMetrics(resumed)
	want, got = quality(want), quality(got)
	if len(want) == 0 || len(want) != len(got) {
		t.Fatalf("metrics: %v vs %v", want, got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: resumed %v, uninterrupted %v", k, got[k], v)
		}
	}
	if w, g := logSteps(t, full), logSteps(t, resumed); !slices.Equal(w, g) {
		t.Errorf("log.jsonl (phase, step) lines: resumed %v, uninterrupted %v", g, w)
	}
}

// skipUnderRace skips a long training run with no goroutines of its own when the race detector
// is on (see raceDetector); the run still executes in every plain `go test`.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceDetector {
		t.Skip("long training run with no goroutines of its own, 10-20x slower under -race; runs without -race")
	}
}

// TestRetrieverRefusesAListLoss: loss.name is read; a list loss cannot train a bi-encoder, and
// the run stops before it writes a run directory.
func TestRetrieverRefusesAListLoss(t *testing.T) {
	dir := newSlice(t)
	rec := smallRecipe(t, dir, "")
	rec.Loss.Name = "pointwise"
	_, err := Run(context.Background(), rec, Options{Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `loss.name = "pointwise"`) {
		t.Fatalf("err = %v, want loss.name refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Error("a run directory was created")
	}
}

func TestKindsRegister(t *testing.T) {
	want := []string{"rag", "realm", "replug", "reranker", "retriever", "selfrag"}
	if got := Kinds(); !slices.Equal(got, want) {
		t.Errorf("Kinds() = %v, want %v", got, want)
	}
	rec := &configs.Recipe{Kind: "colbert"}
	if _, err := Run(context.Background(), rec, Options{}); err == nil || !strings.Contains(err.Error(), `"colbert" is not implemented`) {
		t.Errorf("unknown kind: %v", err)
	}
}
