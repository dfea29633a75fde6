package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writeRun(t *testing.T, metrics, recipe, timeTxt string) string {
	t.Helper()
	d := t.TempDir()
	for name, body := range map[string]string{"metrics.json": metrics, "recipe.resolved.toml": recipe, "time.txt": timeTxt} {
		if body == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

const recipe = `name = "scifact-minilm-dense-refresh"
[loss]
name = "matryoshka_infonce"
dims = [384, 128]
[sampler]
negative_source = "dense_refresh"
refresh_every = 50
negative_relative = 0.95
hard_negatives = 3
[train]
batch_size = 128
mini_batch_size = 16
steps = 13
lr = 1.6e-4
`

func TestLoadRow(t *testing.T) {
	d := writeRun(t, `{"finetuned/nDCG@10": 0.69, "finetuned/Recall@100": 0.95, "train/seconds": 1823.4,
		"mining/dropped_relative": 9580, "finetuned@128/nDCG@10": 0.66, "finetuned.dev/nDCG@10": 0.71}`, recipe,
		"\tCommand being timed: \"train\"\n\tMaximum resident set size (kbytes): 4323324\n")
	r, err := load(d, "finetuned")
	if err != nil {
		t.Fatal(err)
	}
	if r.name != "scifact-minilm-dense-refresh" || r.loss != "matryoshka_infonce" || r.ndcg != 0.69 || r.recall != 0.95 || r.seconds != 1823.4 || r.dev != 0.71 {
		t.Fatalf("row %+v", r)
	}
	if r.negatives != "dense_refresh every 50, relative 0.95, 3 per query" || r.batch != "128 (16) x 13 steps, lr 1.6e-4" {
		t.Fatalf("negatives %q, batch %q", r.negatives, r.batch)
	}
	if want := 4323324.0 / 1024; r.peakMiB != want {
		t.Fatalf("peak %v MiB, want %v", r.peakMiB, want)
	}
	if got := strings.Join(r.extra, "; "); got != "dropped_relative 9580; @128 0.6600" {
		t.Fatalf("notes %q", got)
	}
	// study.sh records the commit a run was made at; the table names it.
	if err := os.WriteFile(filepath.Join(d, "commit.txt"), []byte("2eda02fb1c9d5e3a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = load(d, "finetuned"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.extra, "; "); got != "dropped_relative 9580; @128 0.6600; commit 2eda02f" {
		t.Fatalf("notes with commit.txt %q", got)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := load(writeRun(t, `{"finetuned/nDCG@10": 0.69}`, recipe, ""), "finetuned"); err == nil || !strings.Contains(err.Error(), `no "finetuned/Recall@100"`) {
		t.Fatalf("missing metric: %v", err)
	}
	d := writeRun(t, `{"finetuned/nDCG@10": 0.69, "finetuned/Recall@100": 0.95, "train/seconds": 1}`, recipe, "")
	r, err := load(d, "finetuned")
	if err != nil || r.peakMiB != -1 || !math.IsNaN(r.dev) {
		t.Fatalf("no time.txt, no dev: peak %v, dev %v, %v", r.peakMiB, r.dev, err)
	}
	// Without dev among the eval splits, the dev score of the checkpoint chosen stands in.
	d = writeRun(t, `{"finetuned/nDCG@10": 0.69, "finetuned/Recall@100": 0.95, "train/seconds": 1, "select/dev/nDCG@10": 0.7}`, recipe, "")
	if r, err = load(d, "finetuned"); err != nil || r.dev != 0.7 {
		t.Fatalf("select/dev: dev %v, %v", r.dev, err)
	}
	d = writeRun(t, `{"finetuned/nDCG@10": 0.69, "finetuned/Recall@100": 0.95, "train/seconds": 1}`, recipe, "Maximum resident set size (kbytes): lots\n")
	if _, err := load(d, "finetuned"); err == nil || !strings.Contains(err.Error(), "time.txt:1: maximum resident set size") {
		t.Fatalf("bad time.txt: %v", err)
	}
}

// TestStudyFinished: study.sh's finished picks the newest run of a recipe that wrote
// metrics.json, skips an unfinished newer one, and does not take another recipe's run whose
// name extends it.
func TestStudyFinished(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	runs := t.TempDir()
	for _, d := range []struct {
		name     string
		finished bool
	}{
		{"scifact-minilm-20261202-100000", true},
		{"scifact-minilm-20261202-090000", true},
		{"scifact-minilm-20261202-110000", false},
		{"scifact-minilm-bm25-negatives-20261202-120000", true},
		{"scifact-minilm-teacher-20261202-130000", false},
	} {
		dir := filepath.Join(runs, d.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if d.finished {
			if err := os.WriteFile(filepath.Join(dir, "metrics.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, want := range map[string]string{
		"scifact-minilm":                "scifact-minilm-20261202-100000",
		"scifact-minilm-bm25-negatives": "scifact-minilm-bm25-negatives-20261202-120000",
		"scifact-minilm-teacher":        "",
	} {
		out, err := exec.Command("bash", "-c", `source finished.sh; runs="$1"; finished "$2"`, "bash", runs, name).Output()
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(string(out))
		if want != "" {
			want = filepath.Join(runs, want)
		}
		if got != want {
			t.Errorf("finished %s = %q, want %q", name, got, want)
		}
	}
}

// TestKeptSummaries: every retriever run summary kept in docs/results/study (study.sh KEEP=)
// loads as a table row with the commit it ran at.
func TestKeptSummaries(t *testing.T) {
	dirs, err := filepath.Glob("../../docs/results/study/scifact-minilm-*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if strings.Contains(filepath.Base(d), "-teacher-") { // a reranker run: no finetuned system
			continue
		}
		r, err := load(d, "finetuned")
		if err != nil {
			t.Fatal(err)
		}
		if r.ndcg <= 0 || r.ndcg > 1 || r.peakMiB <= 0 || !strings.Contains(strings.Join(r.extra, "; "), "commit ") {
			t.Fatalf("%s: row %+v", d, r)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no retriever summaries in docs/results/study")
	}
}
