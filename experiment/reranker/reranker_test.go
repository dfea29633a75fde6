package reranker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"

	// The dense first stage reads a retriever run; the tests train one.
	_ "github.com/ragtrain/ragtrain/experiment/retriever"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/model"
)

// rerankRecipe writes a reranker recipe over the slice in dir (a tiny transformer that trains
// in seconds) and loads it.
func rerankRecipe(t *testing.T, dir, extra string) *configs.Recipe {
	t.Helper()
	vars := map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")}
	return testkit.Recipe(t, "rerank-slice", filepath.Join(dir, "recipe.toml"), vars, extra)
}

// TestRerankerSliceOverfitsTrainingQueries trains the three rerankers on a 200-passage slice
// and reranks BM25's top 20 of the training queries: a cross-encoder that can learn its
// training lists orders them better than BM25 does. It also checks the run directory.
func TestRerankerSliceOverfitsTrainingQueries(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := rerankRecipe(t, dir, "")
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(runDir)
	if err != nil {
		t.Fatal(err)
	}
	bm := m["bm25.train/nDCG@10"]
	t.Logf("train split nDCG@10: bm25 %.4f, pairwise %.4f, listwise %.4f, pointwise %.4f; interpolated listwise %.4f (alpha %.1f)",
		bm, m["bm25+pairwise.train/nDCG@10"], m["bm25+listwise.train/nDCG@10"], m["bm25+pointwise.train/nDCG@10"],
		m["bm25+listwise+interp.train/nDCG@10"], m["bm25+listwise+interp/alpha"])
	if bm <= 0.2 {
		t.Fatalf("BM25 nDCG@10 %.4f on the slice's training queries: the slice is broken", bm)
	}
	for _, loss := range []string{"pairwise", "listwise"} {
		if got := m["bm25+"+loss+".train/nDCG@10"]; got < bm+0.05 {
			t.Errorf("%s reranker nDCG@10 %.4f does not beat BM25's %.4f on its training queries", loss, got, bm)
		}
	}
	for _, f := range []string{experiment.ResolvedRecipeFile, experiment.LogFile, experiment.MetricsFile, "tokenizer.json", "latest",
		"reranker-pairwise/latest", "reranker-listwise/latest", "reranker-pointwise/latest",
		"runs/train.bm25.trec", "runs/train.bm25+pairwise.trec", "runs/train.bm25+listwise.trec", "runs/train.bm25+pointwise.trec",
		"runs/train.bm25+pairwise+interp.trec", "runs/train.bm25+listwise+interp.trec", "runs/train.bm25+pointwise+interp.trec"} {
		if _, err := os.Stat(filepath.Join(runDir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	for _, k := range []string{"bm25+listwise.train/pairs_per_second", "bm25+pairwise+interp/alpha", "bm25+listwise+interp/dev_nDCG@10",
		"train/seconds", "train/examples_per_second", "train/passages_cut", "rerank.train/pairs", "rerank.train/passages_cut"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %q", k)
		}
	}
	if a := m["bm25+listwise+interp/alpha"]; a < 0 || a > 1 || math.Abs(a*10-math.Round(a*10)) > 1e-9 {
		t.Errorf("alpha %v is not on the grid 0, 0.1, ..., 1", a)
	}
	// The finished model records the first stage that produced its training candidates.
	ck, err := checkpoints.Load(FinalModelDir(runDir, "listwise"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg model.CrossEncoderConfig
	if err := ck.DecodeConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Kind != "cross-encoder" || cfg.FirstStage != "bm25" || cfg.Loss != "listwise" || cfg.ListSize != 4 || ck.Trainer.Step != 120 {
		t.Errorf("finished model config %+v at step %d", cfg, ck.Trainer.Step)
	}
	// The reranked TREC run is the first stage's candidates, reordered.
	first, err := eval.ReadTREC(filepath.Join(runDir, "runs", "train.bm25.trec"))
	if err != nil {
		t.Fatal(err)
	}
	re, err := eval.ReadTREC(filepath.Join(runDir, "runs", "train.bm25+listwise.trec"))
	if err != nil {
		t.Fatal(err)
	}
	for q, hits := range first {
		if len(re[q]) != len(hits) || len(hits) > 20 {
			t.Fatalf("query %s: %d first-stage hits, %d reranked", q, len(hits), len(re[q]))
		}
	}
}

func TestInterpolate(t *testing.T) {
	first := eval.Run{"q": {{DocID: "a", Score: 10}, {DocID: "b", Score: 8}, {DocID: "c", Score: 6}}}
	rerank := eval.Run{"q": {{DocID: "c", Score: 3}, {DocID: "b", Score: 1}, {DocID: "a", Score: -1}}}
	// normalised first: a 1, b 0.5, c 0; rerank: c 1, b 0.5, a 0.
	cases := []struct {
		alpha float64
		want  []index.Hit
	}{
		{1, []index.Hit{{DocID: "a", Score: 1}, {DocID: "b", Score: 0.5}, {DocID: "c", Score: 0}}},
		{0, []index.Hit{{DocID: "c", Score: 1}, {DocID: "b", Score: 0.5}, {DocID: "a", Score: 0}}},
		{0.7, []index.Hit{{DocID: "a", Score: 0.7}, {DocID: "b", Score: 0.5}, {DocID: "c", Score: 0.3}}},
	}
	for _, c := range cases {
		got := interpolate(first, rerank, c.alpha)["q"]
		for i := range c.want {
			if got[i].DocID != c.want[i].DocID || math.Abs(got[i].Score-c.want[i].Score) > 1e-12 {
				t.Errorf("alpha %v: %v, want %v", c.alpha, got, c.want)
				break
			}
		}
	}
	// Equal scores normalise to 0, not NaN.
	flat := interpolate(eval.Run{"q": {{DocID: "a", Score: 2}, {DocID: "b", Score: 2}}}, eval.Run{"q": {{DocID: "a", Score: 1}, {DocID: "b", Score: 0}}}, 0.5)
	if flat["q"][0].DocID != "a" || flat["q"][0].Score != 0.5 || flat["q"][1].Score != 0 {
		t.Errorf("flat first stage: %v", flat["q"])
	}
	// chooseAlpha picks the best of the grid on the qrels given: c relevant favours the reranker.
	alpha, curve, err := chooseAlpha(first, rerank, map[string]map[string]int{"q": {"c": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if alpha != 0 || len(curve) != 11 || curve[0] != 1 || curve[10] >= 1 {
		t.Errorf("alpha %v, curve %v", alpha, curve)
	}
}

// TestFirstStageRunErrors: a first-stage run file naming a passage that is not in the corpus
// stops the run with one line naming the file and line, before any run directory is made.
func TestFirstStageRunErrors(t *testing.T) {
	dir := testkit.NewSlice(t)
	ds, err := data.Load(filepath.Join(dir, "data"), "train")
	if err != nil {
		t.Fatal(err)
	}
	q := ds.Qrels["train"].QueryIDs()[0]
	d0, d1 := ds.Corpus.IDs[0], ds.Corpus.IDs[1]
	cases := []struct {
		name, run, want string
	}{
		{"unknown doc", fmt.Sprintf("%s Q0 %s 1 9.5 x\n%s Q0 %s 2 9 x\n%s Q0 zz 3 8 x\n", q, d0, q, d1, q),
			`first.trec:3: first-stage run: doc "zz" is not in the corpus`},
		{"unknown query", fmt.Sprintf("%s Q0 %s 1 9.5 x\nnope Q0 %s 1 9 x\n", q, d0, d1),
			`first.trec:2: first-stage run: query "nope" is not in`},
		{"bad line", fmt.Sprintf("%s Q0 %s 1 9.5\n", q, d0), `first.trec:1: run: want 6 fields`},
		{"query without ranking", fmt.Sprintf("%s Q0 %s 1 9.5 x\n", q, d0), `first-stage run: no ranking for query`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "first.trec")
			if err := os.WriteFile(path, []byte(c.run), 0o644); err != nil {
				t.Fatal(err)
			}
			rec := rerankRecipe(t, dir, "")
			Of(rec).FirstStage = path
			rec.Eval.Systems = []string{"rerank"}
			_, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, c.want)
			}
			if c.name != "query without ranking" {
				if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
					t.Error("a run directory was made before the first stage was checked")
				}
			}
		})
	}
}

// TestRerankerResume pretrains on cropping lists, interrupts the second of two rerankers
// mid-way (as SIGINT would) and resumes: the pretrained model and the first reranker load from
// their finished models, the second continues from its checkpoint, and the metrics equal those
// of an uninterrupted run.
func TestRerankerResume(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := rerankRecipe(t, dir, "")
	rec.Train.Steps, rec.Train.CheckpointEvery = 40, 20
	Of(rec).Losses = []string{"pairwise", "listwise"}
	rec.Model.Dropout = 0.1                            // the dropout masks must replay too
	rec.Pretrain.Steps, rec.Pretrain.BatchSize = 10, 4 // cropping lists first, shared by both losses
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: "listwise", InterruptAt: 27})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted run: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(broken, experiment.MetricsFile)); err == nil {
		t.Fatal("an interrupted run wrote metrics.json")
	}
	var out strings.Builder
	resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"resume: ", "at listwise step ", "pretrain: finished model loaded from", "pairwise: finished model loaded from"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("resumed run's output lacks %q:\n%s", want, out.String())
		}
	}
	testkit.SameMetrics(t, "", full, resumed, testkit.Quality)
}

// TestDenseFirstStage reranks the candidates of a retriever run directory (its latest
// checkpoint and tokenizer), and records that directory as the reranker's first stage.
func TestDenseFirstStage(t *testing.T) {
	dir := testkit.NewSlice(t)
	ret := testkit.SmallRecipe(t, dir, "")
	ret.Pretrain.Steps, ret.Train.Steps = 0, 10
	retDir, err := experiment.Run(context.Background(), ret, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	rec := rerankRecipe(t, dir, "")
	Of(rec).FirstStage = retDir
	Of(rec).Losses = []string{"listwise"}
	rec.Eval.Systems = []string{"dense", "rerank"}
	rec.Eval.Splits = []string{"test"}
	rec.Train.Steps = 10
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(runDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"dense/nDCG@10", "dense+listwise/nDCG@10", "dense+listwise+interp/nDCG@10"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics.json lacks %q", k)
		}
	}
	// The reranker's first stage is the retriever's ranking: its top 20 of every test query.
	want, err := eval.ReadTREC(filepath.Join(retDir, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := eval.ReadTREC(filepath.Join(runDir, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got) != len(want) {
		t.Fatalf("%d queries ranked, the retriever ranked %d", len(got), len(want))
	}
	for q, hits := range got {
		if len(hits) != 20 {
			t.Fatalf("query %s: %d candidates, want 20", q, len(hits))
		}
		for i, h := range hits {
			if h.DocID != want[q][i].DocID {
				t.Fatalf("query %s rank %d: %s, the retriever ranks %s", q, i+1, h.DocID, want[q][i].DocID)
			}
		}
	}
	ck, err := checkpoints.Load(FinalModelDir(runDir, "listwise"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg model.CrossEncoderConfig
	if err := ck.DecodeConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.FirstStage, filepath.Join(retDir, "checkpoint-")) {
		t.Errorf("first stage recorded as %q, want a checkpoint of %s", cfg.FirstStage, retDir)
	}
}

// TestRerankerInitFromExport exports a trained reranker (train export's layout), then starts
// new runs from it with model.init_from: with 0 steps the model is the export bit for bit and
// reranks as the original; with more steps it continues from there (its first logged loss is
// below the original run's first); a tensor of the wrong shape stops the run, before it has a
// directory, naming the tensor and both shapes.
func TestRerankerInitFromExport(t *testing.T) {
	dir := testkit.NewSlice(t)
	rec := rerankRecipe(t, dir, "")
	rec.Train.Steps, rec.Train.LogEvery = 60, 20
	Of(rec).Losses = []string{"listwise"}
	first, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	exp := filepath.Join(dir, "exported")
	// The run directory holds a model per loss: the export names them instead of choosing.
	if err := export.Export(first, exp, export.Options{}); err == nil || !strings.Contains(err.Error(), "export one of: "+FinalModelDir(first, "listwise")) {
		t.Fatalf("export of the run directory: err = %v", err)
	}
	// As `train export` calls it (-embeddings defaults to true and is for bi-encoders).
	if err := export.Export(FinalModelDir(first, "listwise"), exp, export.Options{Embeddings: true}); err != nil {
		t.Fatal(err)
	}
	start := func(steps int, from string) (string, string, error) {
		r := rerankRecipe(t, dir, "")
		r.OutputDir = filepath.Join(dir, fmt.Sprint("again", steps))
		r.Train.Steps, r.Train.LogEvery = steps, 20
		Of(r).Losses = []string{"listwise"}
		r.Model.InitFrom = from
		var out strings.Builder
		runDir, err := experiment.Run(context.Background(), r, experiment.Options{Out: &out, Progress: io.Discard})
		return runDir, out.String(), err
	}
	same, out, err := start(0, exp)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"tokenizer: " + filepath.Join(exp, "tokenizer.json"), "init_from: ", "(export layout)"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	a, err := checkpoints.Load(FinalModelDir(first, "listwise"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoints.Load(FinalModelDir(same, "listwise"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Params) != len(b.Params) {
		t.Fatalf("%d vs %d tensors", len(a.Params), len(b.Params))
	}
	for i := range a.Params {
		for j, v := range a.Params[i].Data {
			if math.Float32bits(v) != math.Float32bits(b.Params[i].Data[j]) {
				t.Fatalf("%s[%d]: %v, exported %v", a.Params[i].Name, j, b.Params[i].Data[j], v)
			}
		}
	}
	var cfg model.CrossEncoderConfig
	if err := b.DecodeConfig(&cfg); err != nil || cfg.InitFrom != exp {
		t.Errorf("init_from recorded as %q (%v), want %s", cfg.InitFrom, err, exp)
	}
	ma, _ := experiment.ReadMetrics(first)
	mb, _ := experiment.ReadMetrics(same)
	if k := "bm25+listwise.train/nDCG@10"; ma[k] != mb[k] || ma[k] == 0 {
		t.Errorf("%s: %v from the export, %v originally", k, mb[k], ma[k])
	}

	more, _, err := start(40, exp)
	if err != nil {
		t.Fatal(err)
	}
	firstLoss := func(runDir string) float64 {
		lines, err := os.ReadFile(filepath.Join(runDir, experiment.LogFile))
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Loss float64 }
		if err := json.Unmarshal(bytes.SplitN(lines, []byte("\n"), 2)[0], &e); err != nil {
			t.Fatal(err)
		}
		return e.Loss
	}
	if la, lc := firstLoss(first), firstLoss(more); !(lc < la-0.1) {
		t.Errorf("continued run's first logged loss %.4f, the original's %.4f: it did not start from the export", lc, la)
	}

	// A wrongly shaped tensor: the error names it and both shapes, and no run directory is made.
	path := filepath.Join(exp, export.ModelFile)
	raw, meta, err := checkpoints.ReadSafetensorsRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		if raw[i].Name == "bert.pooler.dense.weight" {
			raw[i].Shape = []int{16, 64}
		}
	}
	if err := checkpoints.WriteSafetensorsRaw(path, raw, meta); err != nil {
		t.Fatal(err)
	}
	_, _, err = start(5, exp)
	if err == nil || !strings.Contains(err.Error(), "model.init_from") ||
		!strings.Contains(err.Error(), "wrong shape: bert.pooler.dense.weight in "+path+" is [16 64], parameter pooler.weight is [32 32]") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "again5")); err == nil {
		t.Error("a run directory was made before init_from was checked")
	}
}

// TestRerankerBadTokenizerBeforeRunDir: a tokenizer.file that does not parse stops the run
// before it has a directory.
func TestRerankerBadTokenizerBeforeRunDir(t *testing.T) {
	dir := testkit.NewSlice(t)
	bad := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(bad, []byte(`{"model": {"type": "WordPiece", "vocab": 7}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := rerankRecipe(t, dir, "")
	rec.Tokenizer.File, rec.Tokenizer.Train = bad, false
	_, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want one naming %s", err, bad)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Error("a run directory was made before the tokenizer was read")
	}
}
