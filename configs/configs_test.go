package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fixture builds, in a temporary directory, a BEIR directory "data" (empty
// files: configs checks only that they exist), a tokenizer "tok.json" and a
// run directory "runs/r1". It returns the directory.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"data/corpus.jsonl", "data/queries.jsonl", "data/qrels/train.tsv",
		"data/qrels/dev.tsv", "data/qrels/test.tsv", "tok.json", "runs/r1/config.json"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeRecipe(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestShippedRecipe(t *testing.T) {
	r, err := Load("../recipes/retriever-cranfield.toml")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Name = "retriever-cranfield"
	want.OutputDir = filepath.Join(repo, "runs")
	want.Data.Dir = filepath.Join(repo, "datasets", "cranfield")
	want.Tokenizer.Train = true
	want.Pretrain.Steps = 3000
	if !reflect.DeepEqual(r.Values(), want) {
		t.Errorf("shipped recipe:\n got %+v\nwant %+v", r, want)
	}
}

// TestDefaults loads the smallest valid recipe and expects Defaults() with
// only the required keys, the name and the paths filled in, and checks the
// documented values of a few keys independently of Defaults.
func TestDefaults(t *testing.T) {
	dir := fixture(t)
	path := filepath.Join(dir, "minimal.toml")
	writeRecipe(t, path, "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n")
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Name = "minimal"
	want.OutputDir = filepath.Join(dir, "runs")
	want.Data.Dir = filepath.Join(dir, "data")
	want.Tokenizer.Train = true
	if !reflect.DeepEqual(r.Values(), want) {
		t.Errorf("minimal recipe:\n got %+v\nwant %+v", r, want)
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"kind", r.Kind, "retriever"},
		{"seed", r.Seed, int64(42)},
		{"loss.temperature", r.Loss.Temperature, 0.05},
		{"train.lr", r.Train.LR, 0.001},
		{"train.batch_size", r.Train.BatchSize, 32},
		{"index.k1", r.Index.K1, 1.2},
		{"index.b", r.Index.B, 0.75},
		{"index.ann_threshold", r.Index.ANNThreshold, 0},
		{"index.ann_m", r.Index.ANNM, 16},
		{"index.ann_ef_construction", r.Index.ANNEfConstruction, 200},
		{"index.ann_ef_search", r.Index.ANNEfSearch, 64},
		{"eval.rrf_k", r.Eval.RRFK, 60},
		{"sampler.negative_window", r.Sampler.NegativeWindow, [2]int{1, 30}},
		{"model.heads", r.Model.Heads, 4},
		{"model.max_position", r.Model.MaxPosition, 512},
		{"pretrain.steps", r.Pretrain.Steps, 0},
		{"train.dynamic_padding", r.Train.DynamicPadding, false},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %v, want %v", c.key, c.got, c.want)
		}
	}
	// Defaults must not share slices between calls (the decoder writes into them).
	a, b := Defaults(), Defaults()
	a.Eval.Splits[0] = "changed"
	if b.Eval.Splits[0] != "test" {
		t.Error("Defaults() calls share the eval.splits slice")
	}
}

// TestPathResolution puts the recipe two directories below its inputs.
func TestPathResolution(t *testing.T) {
	dir := fixture(t)
	path := filepath.Join(dir, "recipes", "sub", "x.toml")
	writeRecipe(t, path, `kind = "reranker"
output_dir = "out"
[data]
dir = "../../data"
[tokenizer]
file = "../../tok.json"
[model]
init_from = "../../runs/r1"
`)
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, got, want string }{
		{"output_dir", r.OutputDir, filepath.Join(dir, "recipes", "sub", "out")},
		{"data.dir", r.Data.Dir, filepath.Join(dir, "data")},
		{"tokenizer.file", r.Tokenizer.File, filepath.Join(dir, "tok.json")},
		{"model.init_from", r.Model.InitFrom, filepath.Join(dir, "runs", "r1")},
		{"name", r.Name, "x"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.key, c.got, c.want)
		}
	}
}

func TestWriteResolvedRoundTrip(t *testing.T) {
	dir := fixture(t)
	custom := filepath.Join(dir, "custom.toml")
	writeRecipe(t, custom, `kind = "reranker"
seed = 7
[data]
dir = "data"
dev_split = ""
title_field = false
[tokenizer]
file = "tok.json"
[model]
encoder = "transformer"
hidden = 96
heads = 3
dropout = 0.0
init_from = "runs/r1"
[train]
lr = 3e-4
grad_clip = 0.0
[eval]
splits = ["dev", "test"]
systems = ["bm25", "rerank"]
metrics = ["nDCG@10", "Recall@10"]
[rerank]
first_stage = "runs/r1"
losses = ["listwise"]
drop_above_first_positive = true
interpolate = false
`)
	for _, src := range []string{"../recipes/retriever-cranfield.toml", custom} {
		r, err := Load(src)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "recipe.resolved.toml")
		if err := os.WriteFile(out, []byte("old contents"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteResolved(out); err != nil {
			t.Fatal(err)
		}
		text, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(text), resolvedHeader) {
			t.Errorf("%s: resolved file lacks its header comment", src)
		}
		// Every schema key of the sections the kind reads is written out.
		lines := keyLines(string(text))
		for _, k := range schemaKeys() {
			section, _, _ := strings.Cut(k, ".")
			if !readsSection(r.Kind, section) {
				continue
			}
			if _, ok := lines[k]; !ok {
				t.Errorf("%s: resolved file lacks key %s", src, k)
			}
		}
		back, err := Load(out)
		if err != nil {
			t.Fatalf("%s: reloading the resolved recipe: %v", src, err)
		}
		if !reflect.DeepEqual(back.Values(), r.Values()) {
			t.Errorf("%s: round trip differs:\n got %+v\nwant %+v", src, back, r)
		}
		entries, _ := os.ReadDir(filepath.Dir(out))
		if len(entries) != 1 {
			t.Errorf("%s: %d files beside the resolved recipe, want 1 (temp file left?)", src, len(entries))
		}
	}
	if err := Defaults().WriteResolved(filepath.Join(dir, "missing-dir", "r.toml")); err == nil {
		t.Error("WriteResolved into a missing directory: no error")
	}
}

// base makes a case's recipe valid apart from what the case tests. It is
// appended, so the case's own text starts at line 1.
const base = "\n[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\n"

func TestLoadErrors(t *testing.T) {
	dir := fixture(t)
	for i, c := range []struct {
		name string
		text string
		raw  bool   // do not append base
		want string // the error must start with "<path>" + want
	}{
		// unknown keys
		{"misspelt key", "[train]\nsteps = 3\nstpes = 3\n", false, `:3: unknown key "train.stpes" (did you mean "train.steps"?)`},
		{"unknown table", "seed = 1\n\n[trian]\nsteps = 3\nlr = 1.0\n", false, `:3: unknown key "trian" (did you mean "train"?) and 2 more unknown keys`},
		{"unknown top-level key", "# comment\nsead = 1\n", false, `:2: unknown key "sead" (did you mean "seed"?)`},
		{"unknown dotted key", "train.stepz = 1\n", false, `:1: unknown key "train.stepz" (did you mean "train.steps"?)`},
		{"unknown key after multi-line array", "[eval]\nmetrics = [\n  \"MAP\",\n  \"P@10\",\n]\nrrf = 60\n", false, `:6: unknown key "eval.rrf"`},
		// wrong types
		{"string for integer", "[train]\nlr = 0.1\nsteps = \"10\"\n", false, `:3: train.steps: wrong type: got a string, want an integer`},
		{"float for integer", "\n[train]\nbatch_size = 1.5\n", false, `:3: train.batch_size: wrong type: got a float, want an integer`},
		{"integer for boolean", "[tokenizer]\ntrain = 1\n[data]\ndir = \"data\"\n", true, `:2: tokenizer.train: wrong type: got an integer, want a boolean`},
		{"string for array", "[sampler]\nnegative_window = \"1-30\"\n", false, `:2: sampler.negative_window: wrong type: got a string, want an array`},
		{"short window", "[sampler]\nnegative_window = [1]\n", false, `:2: sampler.negative_window: expected array length 2; got TOML array of length 1`},
		{"value for table", "train = 5\n", false, `:1: train: wrong type: got an integer, want a table`},
		{"number in string list", "[eval]\nsplits = [\"test\", 3]\n", false, `:2: eval.splits: wrong type: got an integer, want a string`},
		{"syntax error", "[train]\nlr =\n", false, `:2: train.lr: expected value but found '\n' instead`},
		{"duplicate key", "seed = 1\nseed = 2\n", false, `:2: seed: Key 'seed' has already been defined.`},
		// impossible values
		{"temperature zero", "[loss]\ntemperature = 0.0\n", false, `:2: loss.temperature: must be > 0, got 0`},
		{"temperature negative", "[loss]\ntemperature = -1\n", false, `:2: loss.temperature: must be > 0, got -1`},
		{"temperature nan", "[loss]\ntemperature = nan\n", false, `:2: loss.temperature: must be a finite number, got NaN`},
		{"batch size 1", "[train]\nbatch_size = 1\n", false, `:2: train.batch_size: must be >= 2, got 1`},
		{"mini batch negative", "[train]\nmini_batch_size = -1\n", false, `:2: train.mini_batch_size: must be >= 0, got -1`},
		{"mini batch not dividing", "[train]\nbatch_size = 32\nmini_batch_size = 5\n", false, `:3: train.mini_batch_size: train.mini_batch_size = 5 does not divide train.batch_size = 32`},
		{"mini batch above batch", "[train]\nbatch_size = 8\nmini_batch_size = 16\n", false, `:3: train.mini_batch_size: train.mini_batch_size = 16 does not divide train.batch_size = 8`},
		{"mini batch of a reranker", "kind = \"reranker\"\n[train]\nmini_batch_size = 4\n", false, `:3: train.mini_batch_size: gradient caching trains a bi-encoder: kind "reranker" does not read it (0 = off)`},
		{"dynamic padding of a reranker", "kind = \"reranker\"\n[train]\ndynamic_padding = true\n", false, `:3: train.dynamic_padding: length-bucketed training graphs train a bi-encoder: kind "reranker" does not read it (false = off)`},
		{"dynamic padding as string", "[train]\ndynamic_padding = \"yes\"\n", false, `:2: train.dynamic_padding: wrong type: got a string, want a boolean`},
		{"eval_every misspelt", "[train]\neval_evry = 10\n", false, `:2: unknown key "train.eval_evry" (did you mean "train.eval_every"?)`},
		{"eval_every negative", "[train]\neval_every = -1\n", false, `:2: train.eval_every: must be >= 0, got -1`},
		{"eval_every without select", "[train]\neval_every = 10\n", false, `:2: train.eval_every: train.eval_every needs eval.select_metric (the dev metric evaluated, e.g. "nDCG@10")`},
		{"eval_every above steps", "[train]\nsteps = 20\neval_every = 30\n[eval]\nselect_metric = \"nDCG@10\"\n", false, `:3: train.eval_every: train.eval_every = 30 exceeds train.steps = 20 (the last step is evaluated anyway; 0 = off)`},
		{"eval_every of a reranker", "kind = \"reranker\"\n[train]\neval_every = 10\n", false, `:3: train.eval_every: evaluation during training chooses a bi-encoder's checkpoint: kind "reranker" does not read it (0 = off)`},
		{"patience without eval_every", "[train]\npatience = 3\n[eval]\nselect_metric = \"nDCG@10\"\n", false, `:2: train.patience: train.patience counts dev evaluations: it needs train.eval_every >= 1`},
		{"patience negative", "[train]\npatience = -2\n", false, `:2: train.patience: must be >= 0, got -2`},
		{"patience as float", "[train]\npatience = 2.5\n", false, `:2: train.patience: wrong type: got a float, want an integer`},
		{"dev sample without select", "[eval]\ndev_corpus_sample = 100\n", false, `:2: eval.dev_corpus_sample: eval.dev_corpus_sample needs eval.select_metric (the dev metric evaluated, e.g. "nDCG@10")`},
		{"dev sample negative", "[eval]\ndev_corpus_sample = -5\n", false, `:2: eval.dev_corpus_sample: must be >= 0, got -5`},
		{"refresh without period", "[sampler]\nnegative_source = \"dense_refresh\"\n", false, `:2: sampler.negative_source: sampler.negative_source = "dense_refresh" needs sampler.refresh_every >= 1, got 0`},
		{"refresh period zero", "[sampler]\nnegative_source = \"dense_refresh\"\nrefresh_every = 0\n", false, `:3: sampler.refresh_every: sampler.negative_source = "dense_refresh" needs sampler.refresh_every >= 1, got 0`},
		{"refresh period without refresh", "[sampler]\nrefresh_every = 10\n", false, `:2: sampler.refresh_every: re-mining needs sampler.negative_source = "dense_refresh", got "bm25" (0 = unset)`},
		{"margin negative", "[sampler]\nnegative_source = \"dense_refresh\"\nrefresh_every = 5\nnegative_margin = -0.1\n", false, `:4: sampler.negative_margin: must be >= 0, got -0.1`},
		{"relative above 1", "[sampler]\nnegative_source = \"dense_refresh\"\nrefresh_every = 5\nnegative_relative = 1.5\n", false, `:4: sampler.negative_relative: must be in [0, 1], got 1.5`},
		{"filter on bm25", "[sampler]\nnegative_relative = 0.95\n", false, `:2: sampler.negative_relative: the false-negative filters compare dense scores: they need sampler.negative_source = "dense_refresh", got "bm25"`},
		{"pretrain batch size", "[pretrain]\nsteps = 10\nbatch_size = 0\n", false, `:3: pretrain.batch_size: must be >= 2, got 0`},
		{"k1 negative", "[index]\nk1 = -0.1\n", false, `:2: index.k1: must be >= 0, got -0.1`},
		{"b above 1", "[index]\nb = 1.5\n", false, `:2: index.b: must be in [0, 1], got 1.5`},
		{"ann threshold negative", "[index]\nann_threshold = -1\n", false, `:2: index.ann_threshold: must be >= 0, got -1`},
		{"ann threshold as string", "[index]\nk1 = 1.2\nann_threshold = \"100k\"\n", false, `:3: index.ann_threshold: wrong type: got a string, want an integer`},
		{"ann threshold misspelt", "[index]\nann_treshold = 10\n", false, `:2: unknown key "index.ann_treshold" (did you mean "index.ann_threshold"?)`},
		{"ann threshold of a reranker", "kind = \"reranker\"\n[index]\nann_threshold = 10\n", false, `:3: index.ann_threshold: searches a retriever recipe's corpus with HNSW: kind "reranker" does not read it (0 = exact search)`},
		{"ann m 1", "[index]\nann_m = 1\n", false, `:2: index.ann_m: HNSW's M = 1, want 2..127`},
		{"ann m 128", "[index]\n\nann_m = 128\n", false, `:3: index.ann_m: HNSW's M = 128, want 2..127`},
		{"ann ef construction 0", "[index]\nann_ef_construction = 0\n", false, `:2: index.ann_ef_construction: must be >= 1, got 0`},
		{"ann ef search 0", "[index]\nann_ef_search = 0\n", false, `:2: index.ann_ef_search: must be >= 1, got 0`},
		{"ann ef search float", "[index]\nann_ef_search = 1.5\n", false, `:2: index.ann_ef_search: wrong type: got a float, want an integer`},
		{"max_length 3", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\nmax_length = 3\n", true, `:5: tokenizer.max_length: must be >= 4, got 3`},
		{"vocab too small", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\nvocab_size = 99\n", true, `:5: tokenizer.vocab_size: must be >= 100, got 99`},
		{"steps negative", "[train]\nsteps = -1\n", false, `:2: train.steps: must be >= 0, got -1`},
		{"lr zero", "[train]\nlr = 0\n", false, `:2: train.lr: must be > 0, got 0`},
		{"lr infinite", "[train]\nlr = inf\n", false, `:2: train.lr: must be a finite number, got +Inf`},
		{"encoder lstm", "[model]\nencoder = \"lstm\"\n", false, `:2: model.encoder: unknown value "lstm", want one of "bow" or "transformer"`},
		{"similarity l2", "[loss]\nsimilarity = \"l2\"\n", false, `:2: loss.similarity: unknown value "l2", want one of "dot" or "cosine"`},
		{"kind", "kind = \"gan\"\n", false, `:1: kind: unknown value "gan", want one of "rag", "realm", "replug", "reranker", "retriever" or "selfrag" (the registered kinds)`},
		{"schedule", "[train]\nschedule = \"step\"\n", false, `:2: train.schedule: unknown value "step", want one of "linear", "cosine" or "constant"`},
		{"precision fp16", "[train]\nsteps = 1\nprecision = \"fp16\"\n", false, `:3: train.precision: unknown value "fp16", want one of "float32" or "bf16"`},
		{"precision BF16", "[train]\nprecision = \"BF16\"\n", false, `:2: train.precision: unknown value "BF16", want one of "float32" or "bf16"`},
		{"precision misspelt", "[train]\nprecison = \"bf16\"\n", false, `:2: unknown key "train.precison" (did you mean "train.precision"?)`},
		{"precision as number", "[train]\nprecision = 16\n", false, `:2: train.precision: wrong type: got an integer, want a string`},
		{"window from 0", "[sampler]\nnegative_window = [0, 30]\n", false, `:2: sampler.negative_window: must be [first, last] with 1 <= first <= last, got [0, 30]`},
		{"window reversed", "[sampler]\nnegative_window = [30, 1]\n", false, `:2: sampler.negative_window: must be [first, last] with 1 <= first <= last, got [30, 1]`},
		{"rrf_k zero", "[eval]\nrrf_k = 0\n", false, `:2: eval.rrf_k: must be >= 1, got 0`},
		{"metric unknown", "[eval]\nmetrics = [\"F1@10\"]\n", false, `:2: eval.metrics: unknown metric "F1@10", want one of "nDCG", "MRR", "Recall", "P" or "MAP", optionally with @k`},
		{"metric cutoff 0", "[eval]\nmetrics = [\"nDCG@0\"]\n", false, `:2: eval.metrics: metric "nDCG@0": cutoff must be an integer >= 1`},
		{"depth below cutoff", "[eval]\ndepth = 100\n", false, `:2: eval.depth: metric "Recall@1000" needs 1000 hits but eval.depth = 100`},
		{"system unknown", "[eval]\nsystems = [\"bm25\", \"splade\"]\n", false, `:2: eval.systems: unknown value "splade", want one of "bm25", "dense", "rrf", "rerank", "zeroshot" or "finetuned"`},
		{"system twice", "[eval]\nsystems = [\"bm25\", \"bm25\"]\n", false, `:2: eval.systems: "bm25" listed twice`},
		{"name with slash", "name = \"a/b\"\n", false, `:1: name: "a/b" cannot name a run directory (no path separators, not . or ..)`},
		{"seed negative", "seed = -1\n", false, `:1: seed: must be >= 0, got -1`},
		{"dropout 1", "[model]\ndropout = 1.0\n", false, `:2: model.dropout: must be in [0, 1), got 1`},
		{"heads do not divide", "[model]\nencoder = \"transformer\"\nhidden = 130\n", false, `:3: model.hidden: model.hidden = 130 is not a multiple of model.heads = 4`},
		{"positions below length", "[model]\nencoder = \"transformer\"\nmax_position = 32\n", false, `:3: model.max_position: model.max_position = 32 is below tokenizer.max_length = 64`},
		{"crop max below min", "[pretrain]\ncrop_min = 40\n", false, `:2: pretrain.crop_min: pretrain.crop_max = 32 is below pretrain.crop_min = 40`},
		// tokenizer: neither or both
		{"tokenizer neither", "[data]\ndir = \"data\"\n[tokenizer]\nvocab_size = 200\n", true, `:3: tokenizer: set file = "path/to/tokenizer.json" or train = true (or model.init_from, whose tokenizer is used)`},
		{"tokenizer neither, no table", "[data]\ndir = \"data\"\n", true, `: tokenizer: set file = "path/to/tokenizer.json" or train = true (or model.init_from, whose tokenizer is used)`},
		{"tokenizer both", "[data]\ndir = \"data\"\n[tokenizer]\ntrain = true\nfile = \"tok.json\"\n", true, `:5: tokenizer.file: set either file or train = true, not both`},
		// missing inputs
		{"data dir missing", "[data]\ndir = \"nope\"\n[tokenizer]\ntrain = true\n", true, `:2: data.dir: stat ` + filepath.Join(dir, "nope") + `: no such file or directory`},
		{"data dir unset", "[tokenizer]\ntrain = true\n", true, `: data.dir: required: the BEIR directory (corpus.jsonl, queries.jsonl, qrels/)`},
		{"data dir is a file", "[data]\ndir = \"tok.json\"\n[tokenizer]\ntrain = true\n", true, `:2: data.dir: ` + filepath.Join(dir, "tok.json") + ` is not a directory`},
		{"split missing", "[data]\ndir = \"data\"\ntest_split = \"heldout\"\n[tokenizer]\ntrain = true\n", true, `:3: data.test_split: stat ` + filepath.Join(dir, "data", "qrels", "heldout.tsv") + `: no such file`},
		{"eval split missing", "[eval]\nsplits = [\"valid\"]\n", false, `:2: eval.splits: stat ` + filepath.Join(dir, "data", "qrels", "valid.tsv") + `: no such file`},
		{"tokenizer file missing", "[data]\ndir = \"data\"\n[tokenizer]\nfile = \"missing.json\"\n", true, `:4: tokenizer.file: stat ` + filepath.Join(dir, "missing.json") + `: no such file`},
		{"init_from missing", "[model]\ninit_from = \"runs/r2\"\n", false, `:2: model.init_from: stat ` + filepath.Join(dir, "runs", "r2") + `: no such file`},
	} {
		text := c.text
		if !c.raw {
			text += base
		}
		path := filepath.Join(dir, "case"+strconv.Itoa(i)+".toml")
		writeRecipe(t, path, text)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if want := path + c.want; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %q\nwant %q...", c.name, err, want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", c.name, err)
		}
	}
}

// TestValidEdgeValues accepts the boundary of every range.
func TestValidEdgeValues(t *testing.T) {
	dir := fixture(t)
	path := filepath.Join(dir, "edges.toml")
	writeRecipe(t, path, `seed = 0
[data]
dir = "data"
dev_split = ""
test_split = ""
[tokenizer]
file = "tok.json"
vocab_size = 5      # only checked when training
max_length = 4
[model]
dropout = 0.0
[loss]
temperature = 1e-9
[sampler]
hard_negatives = 0
negative_window = [7, 7]
[pretrain]
crop_min = 32
[train]
steps = 0
batch_size = 2
warmup_steps = 0
grad_clip = 0.0
checkpoint_every = 0
[index]
k1 = 0.0
b = 1.0
[eval]
splits = []
rrf_k = 1
depth = 10
metrics = ["MAP", "P@10"]
`)
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	// Evaluation during training: every step, patience 1, a sample of one passage.
	path = filepath.Join(dir, "edges-eval.toml")
	writeRecipe(t, path, base+"[train]\nsteps = 5\neval_every = 5\npatience = 1\n[eval]\nselect_metric = \"nDCG@10\"\ndev_corpus_sample = 1\n")
	r, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Train.EvalEvery != 5 || r.Train.Patience != 1 || r.Eval.DevCorpusSample != 1 {
		t.Fatalf("eval_every edges read as %+v %+v", r.Train, r.Eval)
	}
	// HNSW from one passage on, with the smallest graph and candidate lists; M at its top.
	for _, m := range []int{2, 127} {
		path = filepath.Join(dir, "edges-ann.toml")
		writeRecipe(t, path, base+fmt.Sprintf("[index]\nann_threshold = 1\nann_m = %d\nann_ef_construction = 1\nann_ef_search = 1\n", m))
		r, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if ix := r.Index; ix.ANNThreshold != 1 || ix.ANNM != m || ix.ANNEfConstruction != 1 || ix.ANNEfSearch != 1 {
			t.Fatalf("ann edges read as %+v", ix)
		}
	}
	// Bucketed training graphs, with the one-graph batch (no mini_batch_size).
	path = filepath.Join(dir, "edges-buckets.toml")
	writeRecipe(t, path, base+"[train]\ndynamic_padding = true\n")
	if r, err = Load(path); err != nil || !r.Train.DynamicPadding {
		t.Fatalf("train.dynamic_padding = true: err %v, read %v", err, r != nil && r.Train.DynamicPadding)
	}
	// and with gradient caching (each chunk padded to its bucket).
	writeRecipe(t, path, base+"[train]\nbatch_size = 8\nmini_batch_size = 4\ndynamic_padding = true\n")
	if r, err = Load(path); err != nil || !r.Train.DynamicPadding || r.Train.MiniBatchSize != 4 {
		t.Fatalf("train.dynamic_padding with mini_batch_size: err %v", err)
	}
}

func TestKeyLines(t *testing.T) {
	doc := `top = 1 # a = 2
"quoted key" = "x = [y"
[a]
b = """
c = 3
"""
d = [
  1, # e = 4
  [2, 3],
]
f = { g = 1, h = 2 }
'literal' = 'it''s'
[ x . "y.z" ]
i.j = 5
[[arr]]
k = 6
`
	got := keyLines(doc)
	want := map[string]int{
		"top": 1, "quoted key": 2, "a": 3, "a.b": 4, "a.d": 7, "a.f": 11, "a.literal": 12,
		"x": 13, "x.y.z": 13, "x.y": 13, "x.y.z.i": 14, "x.y.z.i.j": 14, "arr": 15, "arr.k": 16,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keyLines:\n got %v\nwant %v", got, want)
	}
}

// TestDocTable checks that doc.go documents every key of the shared sections with its default
// and documents no key the schema lacks (a kind's own section is documented, and checked, in
// its package).
func TestDocTable(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range DocTableErrors(src, "", Defaults()) {
		t.Errorf("doc.go: %s", e)
	}
	// A floor, not a count: sections are added by parallel work; DocTableErrors checks every
	// key against its row. 103 keys existed when the floor was set, 84 after [atlas] and
	// [replug] moved to their kinds' packages, 57 after [selfrag] and [rerank] (issue 36).
	if n := len(leafValues(reflect.ValueOf(*Defaults()), "")); n < 57 {
		t.Errorf("schema has %d keys, want at least 57 (leafValues lost a section?)", n)
	}
}

// FuzzKeyLines checks that the key scanner never panics, whatever the text:
// Load runs it before the parser has accepted the document.
func FuzzKeyLines(f *testing.F) {
	for _, s := range []string{"a = 1", "[a\nb = \"", "x = '''\n", "\"k", "[[", "a.\"b = 1", "x = [\"\\", "'''"} {
		f.Add(s)
	}
	src, err := os.ReadFile("../recipes/retriever-cranfield.toml")
	if err == nil {
		f.Add(string(src))
	}
	f.Fuzz(func(t *testing.T, s string) { keyLines(s) })
}

func TestDiffNamesTheFirstDifferentKey(t *testing.T) {
	a, b := Defaults(), Defaults()
	if d, err := a.Diff(b); err != nil || d != "" {
		t.Fatalf("equal recipes: diff %q, err %v", d, err)
	}
	b.Loss.Temperature = 0.1
	d, err := a.Diff(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d, "loss.temperature: ") || !strings.Contains(d, "0.1") {
		t.Fatalf("diff %q, want it to name loss.temperature and 0.1", d)
	}
}
