package retriever

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
)

// lossRecipe writes the slice recipe (testkit.SmallRecipe's) with keys added to its [loss]
// table and the replacements of repl (old, new pairs) made, and returns its path.
func lossRecipe(t *testing.T, dir, name, keys string, repl ...string) string {
	t.Helper()
	text := testkit.RecipeText(t, "slice", map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")})
	text = strings.Replace(text, "[loss]\n", "[loss]\n"+keys, 1)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(text, repl[i]) {
			t.Fatalf("slice recipe lacks %q", repl[i])
		}
		text = strings.Replace(text, repl[i], repl[i+1], 1)
	}
	path := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMatryoshkaSliceEvaluatesEveryPrefix trains matryoshka_infonce with dims [64, 32, 16] on
// the slice: metrics.json holds each system at the full 64 dimensions and at 32 and 16
// ("dense@32/nDCG@10", "finetuned@16/..."), each TREC file (runs/test.dense_d32.trec) is the
// ranking evaluated, a 16-dimensional prefix still ranks far better than random, and the
// export with truncate_dim 16 holds the corpus embeddings of that prefix, re-normalised; a run
// interrupted mid-train and resumed ends with the same numbers at every prefix.
func TestMatryoshkaSliceEvaluatesEveryPrefix(t *testing.T) {
	dir := testkit.NewSlice(t)
	path := lossRecipe(t, dir, "mrl", "name = \"matryoshka_infonce\"\ndims = [64, 32, 16]\ndim_weights = [1, 1, 1]\n",
		"[pretrain]\nsteps = 60", "[pretrain]\nsteps = 0")
	rec := testkit.RecipeFile(t, path)
	rec.Eval.Systems = []string{"bm25", "dense", "finetuned", "rrf"}
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(runDir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := data.Load(filepath.Join(dir, "data"), "test")
	if err != nil {
		t.Fatal(err)
	}
	base := randomBaseline(t, filepath.Join(dir, "data"))
	t.Logf("random %.4f; dense %.4f, @32 %.4f, @16 %.4f", base, m["dense/nDCG@10"], m["dense@32/nDCG@10"], m["dense@16/nDCG@10"])
	for _, sys := range []string{"dense", "finetuned", "dense@32", "dense@16", "finetuned@32", "finetuned@16"} {
		file := strings.ReplaceAll(sys, "@", "_d")
		run, err := eval.ReadTREC(filepath.Join(runDir, "runs", "test."+file+".trec"))
		if err != nil {
			t.Fatalf("%s: %v", sys, err)
		}
		again, _ := eval.Evaluate(run, ds.Qrels["test"], []string{"nDCG@10"})
		if got, ok := m[sys+"/nDCG@10"]; !ok || math.Abs(again["nDCG@10"]-got) > 1e-9 {
			t.Errorf("%s: metrics.json nDCG@10 %v (present %v), its TREC file %v", sys, got, ok, again["nDCG@10"])
		}
	}
	if m["dense@32/nDCG@10"] != m["finetuned@32/nDCG@10"] || m["dense@32/nDCG@10"] == m["dense/nDCG@10"] {
		t.Errorf("dense@32 %v, finetuned@32 %v, dense %v: want the same prefix ranking under both names, unlike the full one",
			m["dense@32/nDCG@10"], m["finetuned@32/nDCG@10"], m["dense/nDCG@10"])
	}
	if _, ok := m["dense@64/nDCG@10"]; ok {
		t.Error("the full dimension is reported as a prefix too")
	}
	if m["dense@16/nDCG@10"] < 2*base+0.05 {
		t.Errorf("16-dimensional prefix: nDCG@10 %.4f does not beat the random ranking's %.4f", m["dense@16/nDCG@10"], base)
	}

	// Interrupted mid-train (step 33, after the checkpoint at 20) and resumed: every metric at
	// every prefix, each prefix's TREC file and the log's steps as in the uninterrupted run.
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "train", InterruptAt: 33})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SameMetrics(t, "resume: ", runDir, resumed, testkit.Quality)
	for _, f := range []string{"test.finetuned.trec", "test.finetuned_d32.trec", "test.finetuned_d16.trec"} {
		testkit.SameFile(t, filepath.Join(runDir, "runs", f), filepath.Join(resumed, "runs", f))
	}
	if w, g := testkit.LogSteps(t, runDir), testkit.LogSteps(t, resumed); !slices.Equal(w, g) {
		t.Errorf("log.jsonl (phase, step) lines: resumed %v, uninterrupted %v", g, w)
	}

	// The export at truncate_dim 16: ragtrain.json says so, embeddings are the prefix of the
	// full export's rows, normalised again.
	full, cut := filepath.Join(dir, "full"), filepath.Join(dir, "cut")
	if err := export.Export(runDir, full, export.Options{Embeddings: true}); err != nil {
		t.Fatal(err)
	}
	if err := export.Export(runDir, cut, export.Options{Embeddings: true, TruncateDim: 16}); err != nil {
		t.Fatal(err)
	}
	var man export.Manifest
	b, _ := os.ReadFile(filepath.Join(cut, export.ManifestFile))
	if err := jsonUnmarshal(b, &man); err != nil || man.TruncateDim != 16 {
		t.Errorf("ragtrain.json truncate_dim = %d (%v), want 16", man.TruncateDim, err)
	}
	_, fv, fm, err := export.ReadEmbeddings(filepath.Join(full, export.EmbeddingsDir))
	if err != nil {
		t.Fatal(err)
	}
	_, cv, cm, err := export.ReadEmbeddings(filepath.Join(cut, export.EmbeddingsDir))
	if err != nil {
		t.Fatal(err)
	}
	if fm.Dim != 64 || cm.Dim != 16 || cm.Count != fm.Count || !cm.Normalized {
		t.Fatalf("embeddings: full dim %d, truncated dim %d normalized %v, counts %d and %d", fm.Dim, cm.Dim, cm.Normalized, fm.Count, cm.Count)
	}
	for i := range cm.Count {
		var n float64
		for _, v := range fv[i*64 : i*64+16] {
			n += float64(v) * float64(v)
		}
		n = math.Sqrt(n)
		for j := range 16 {
			if d := math.Abs(float64(cv[i*16+j]) - float64(fv[i*64+j])/n); d > 1e-5 {
				t.Fatalf("row %d col %d: truncated %v, full prefix normalised %v", i, j, cv[i*16+j], float64(fv[i*64+j])/n)
			}
		}
	}
}

// TestLossKeysErrors: what a loss needs and the keys only some losses read are checked at load,
// each error naming the file, the line and the key.
func TestLossKeysErrors(t *testing.T) {
	dir := testkit.NewSlice(t)
	teacher := t.TempDir()
	for _, c := range []struct {
		name, keys, key, want string
		repl                  []string
	}{
		{"ascending", "name = \"matryoshka_infonce\"\ndims = [16, 32]\n", "loss.dims", "strictly descending", nil},
		{"too wide", "name = \"matryoshka_infonce\"\ndims = [128, 64]\n", "loss.dims", "exceeds the model's output dimension model.hidden = 64", nil},
		{"zero dim", "name = \"matryoshka_infonce\"\ndims = [64, 0]\n", "loss.dims", "dims[1] = 0, want >= 1", nil},
		{"no dims", "name = \"matryoshka_infonce\"\n", "loss.name", "needs loss.dims", nil},
		{"weights length", "name = \"matryoshka_infonce\"\ndims = [64, 32]\ndim_weights = [1, 1, 1]\n", "loss.dim_weights", "3 weights for the 2 loss.dims", nil},
		{"weight zero", "name = \"matryoshka_infonce\"\ndims = [64, 32]\ndim_weights = [1, 0]\n", "loss.dim_weights", "dim_weights[1] = 0, want > 0", nil},
		{"dims without matryoshka", "dims = [64, 32]\n", "loss.dims", "read only by loss.name = \"matryoshka_infonce\"", nil},
		{"margin_mse negatives", "name = \"margin_mse\"\nteacher = \"" + teacher + "\"\n", "loss.name", "needs sampler.hard_negatives = 1, got 2",
			[]string{"[eval]\n", "[sampler]\nhard_negatives = 2\n[eval]\n"}},
		{"kl_distill teacher", "name = \"kl_distill\"\n", "loss.name", "set loss.teacher", nil},
		{"teacher without distillation", "teacher = \"" + teacher + "\"\n", "loss.teacher", "read only by the distillation losses", nil},
		{"teacher temperature", "name = \"kl_distill\"\nteacher = \"" + teacher + "\"\nteacher_temperature = 0\n", "loss.teacher_temperature", "must be > 0", nil},
		{"infonce_weight without distillation", "infonce_weight = 1.0\n", "loss.infonce_weight", "read only by the distillation losses", nil},
		{"infonce_weight negative", "name = \"margin_mse\"\nteacher = \"" + teacher + "\"\ninfonce_weight = -0.5\n", "loss.infonce_weight", "= -0.5, want >= 0", nil},
		{"teacher_bm25_weight without distillation", "teacher_bm25_weight = 0.1\n", "loss.teacher_bm25_weight", "read only by the distillation losses", nil},
		{"teacher_bm25_weight negative", "name = \"kl_distill\"\nteacher = \"" + teacher + "\"\nteacher_bm25_weight = -1.0\n", "loss.teacher_bm25_weight", "= -1, want >= 0", nil},
		{"teacher missing", "name = \"margin_mse\"\nteacher = \"" + filepath.Join(teacher, "nope") + "\"\n", "loss.teacher", "no such file", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := lossRecipe(t, dir, "bad", c.keys, c.repl...)
			_, err := configs.Load(path)
			if err == nil {
				t.Fatal("loaded")
			}
			text, _ := os.ReadFile(path)
			line := 0
			short := strings.TrimPrefix(c.key, "loss.")
			inLoss := false
			for i, l := range strings.Split(string(text), "\n") {
				if strings.HasPrefix(l, "[") {
					inLoss = l == "[loss]"
				}
				if inLoss && strings.HasPrefix(l, short+" =") {
					line = i + 1
				}
			}
			want := path + ":" + itoa(line) + ": " + c.key + ": "
			if line == 0 || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v\nwant %q ... %q", err, want, c.want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
