// Package testkit holds what the tests of the kind packages share: the Cranfield slice, the
// loader of the test recipes in testdata/recipes (Recipe; see its README.md), and readers of a
// run's log.jsonl and metrics. It is imported by tests only.
package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/internal/gardentest"
	"github.com/ragtrain/ragtrain/internal/racecheck"
	"github.com/ragtrain/ragtrain/tokenize"
)

// sliceCranfield writes a 200-passage slice of the shipped Cranfield collection into dir:
// every passage judged relevant to the first train and test queries that fit, then others
// in file order, with the qrels restricted to the slice.
func sliceCranfield(t *testing.T, dir string, size int) {
	t.Helper()
	src := filepath.Join("..", "..", "datasets", "cranfield") // from the test of a kind package, experiment/<kind>
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

// SmallRecipe writes the recipe testdata/recipes/slice.toml over the slice in dir, with extra
// appended, to dir/recipe.toml and loads it.
func SmallRecipe(t *testing.T, dir, extra string) *configs.Recipe {
	t.Helper()
	vars := map[string]string{"OUT": filepath.Join(dir, "runs"), "DATA": filepath.Join(dir, "data")}
	return Recipe(t, "slice", filepath.Join(dir, "recipe.toml"), vars, extra)
}

// Recipe reads the test recipe testdata/recipes/<name>.toml, drops the comment lines it opens
// with, replaces each {{KEY}} with vars[KEY], appends extra, writes the text to path and loads it.
func Recipe(t *testing.T, name, path string, vars map[string]string, extra string) *configs.Recipe {
	t.Helper()
	text := RecipeText(t, name, vars) + extra
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// RecipeText is the text Recipe writes, without extra.
func RecipeText(t *testing.T, name string, vars map[string]string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "testdata", "recipes", name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for strings.HasPrefix(text, "#") {
		_, text, _ = strings.Cut(text, "\n")
	}
	for k, v := range vars {
		text = strings.ReplaceAll(text, "{{"+k+"}}", v)
	}
	if i := strings.Index(text, "{{"); i >= 0 {
		t.Fatalf("test recipe %s: no value for the placeholder at %q", name, text[i:min(len(text), i+20)])
	}
	return text
}

// NewSlice writes a 200-passage slice of Cranfield into a temporary directory's data/ and
// returns the directory.
func NewSlice(t *testing.T) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	sliceCranfield(t, filepath.Join(dir, "data"), 200)
	return dir
}

// Quality drops the timing entries of metrics.json, which differ from run to run: train/*,
// rates ("per_second") and times ("seconds", "milliseconds", "_ms").
func Quality(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, "train/") || strings.Contains(k, "per_second") || strings.Contains(k, "seconds") || strings.Contains(k, "_ms") {
			continue
		}
		out[k] = v
	}
	return out
}

// TrainLines lists log.jsonl's training lines without their timings, in order, each as
// "phase step loss lr grad_norm".
func TrainLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, l := range trainRecords(t, dir) {
		out = append(out, fmt.Sprint(l["phase"], l["step"], l["loss"], l["lr"], l["grad_norm"]))
	}
	return out
}

// LogSteps lists the (phase, step) of log.jsonl's training lines, in order.
func LogSteps(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, l := range trainRecords(t, dir) {
		phase, _ := l["phase"].(string)
		step, _ := l["step"].(float64)
		out = append(out, fmt.Sprintf("%s/%d", phase, int(step)))
	}
	return out
}

// trainRecords returns log.jsonl's training lines (those with a loss), in order.
func trainRecords(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if _, ok := l["loss"]; ok {
			out = append(out, l)
		}
	}
	return out
}

// SkipUnderRace is racecheck.SkipUnderRace.
func SkipUnderRace(t *testing.T) {
	t.Helper()
	racecheck.SkipUnderRace(t)
}

// SameFile fails t unless the files a and b hold the same bytes.
func SameFile(t *testing.T, a, b string) {
	t.Helper()
	if x, y := loadBoth(t, os.ReadFile, a, b); !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ", a, b)
	}
}

// loadBoth returns load(a) and load(b), failing t on the first error.
func loadBoth[T any](t *testing.T, load func(string) (T, error), a, b string) (T, T) {
	t.Helper()
	x, err := load(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := load(b)
	if err != nil {
		t.Fatal(err)
	}
	return x, y
}

// GardenTokenizer trains a small WordPiece vocabulary on garden-like text with the reader's
// special tokens (specials): gardentest.Tokenizer, which the garden libraries' tests outside
// experiment/ use too.
func GardenTokenizer(t *testing.T, specials ...string) *tokenize.Tokenizer {
	t.Helper()
	return gardentest.Tokenizer(t, specials...)
}

// Untimed drops the timing keys of metrics (names with "seconds", or "_ms": milliseconds).
func Untimed(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if !strings.Contains(k, "seconds") && !strings.Contains(k, "_ms") {
			out[k] = v
		}
	}
	return out
}

// LogLine is one line of log.jsonl as the realm phases write it.
type LogLine struct {
	Phase      string  `json:"phase"`
	Step       int     `json:"step"`
	IndexStep  *int    `json:"index_step"`
	IndexHash  string  `json:"index_hash"`
	Staleness  int     `json:"staleness"`
	Refresh    string  `json:"refresh"`
	Version    int     `json:"version_step"`
	EncodeSecs float64 `json:"encoding_seconds"`
}

// StudyRecipe is a kind = "replug" or "realm" recipe over a small garden world (the reader
// and retriever of the rag tests' recipe, shorter), small enough for a test run of a few seconds:
// testdata/recipes/study.toml with extra appended.
func StudyRecipe(t *testing.T, kind, extra string) *configs.Recipe {
	t.Helper()
	path := filepath.Join(t.TempDir(), kind+"-small.toml")
	return Recipe(t, "study", path, map[string]string{"KIND": kind}, extra)
}

// TinyStudyRecipe is StudyRecipe with a reader too small to read well: the tests using it
// check the machinery (refresh, staleness, interruption, resume), not the accuracy.
func TinyStudyRecipe(t *testing.T, kind, extra string) *configs.Recipe {
	t.Helper()
	rec := StudyRecipe(t, kind, extra)
	rec.World.Gardeners, rec.World.Biographies, rec.World.News, rec.World.DatastoreNews = 80, 300, 300, 40
	rec.Reader.Hidden, rec.Reader.Layers, rec.Reader.FFN, rec.Reader.FinetuneSteps = 32, 1, 64, 30
	rec.Pretrain.Steps, rec.Train.Steps = 10, 10
	return rec
}

// ReadLog reads the lines of the run directory dir's log.jsonl.
func ReadLog(t *testing.T, dir string) []LogLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, experiment.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []LogLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l LogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log.jsonl: %v: %s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// SameMetrics fails t unless the metrics.json of the run directories full and resumed agree on
// every key keep retains (Quality or Untimed), naming each that differs; where is a prefix for
// the messages ("" for none).
func SameMetrics(t *testing.T, where, full, resumed string, keep func(map[string]float64) map[string]float64) {
	t.Helper()
	want, got := loadBoth(t, experiment.ReadMetrics, full, resumed)
	want, got = keep(want), keep(got)
	if len(want) == 0 || len(want) != len(got) {
		t.Fatalf("%smetrics: %v vs %v", where, want, got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s%s: resumed %v, uninterrupted %v", where, k, got[k], v)
		}
	}
}

// RecipeFile loads the recipe at path.
func RecipeFile(t *testing.T, path string) *configs.Recipe {
	t.Helper()
	rec, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// SameRunDir fails t unless the run directory resumed ended as full did: metrics.json (timing
// keys aside), every TREC run byte for byte, and log.jsonl's (phase, step) lines. where
// prefixes the messages.
func SameRunDir(t *testing.T, where, full, resumed string) {
	t.Helper()
	SameMetrics(t, where, full, resumed, Untimed)
	runs, _ := filepath.Glob(filepath.Join(full, "runs", "*.trec"))
	if len(runs) == 0 {
		t.Fatalf("%sno TREC runs in %s", where, full)
	}
	for _, r := range runs {
		SameFile(t, r, filepath.Join(resumed, "runs", filepath.Base(r)))
	}
	if w, g := LogSteps(t, full), LogSteps(t, resumed); !slices.Equal(w, g) {
		t.Errorf("%slog.jsonl (phase, step) lines: resumed %v, uninterrupted %v", where, g, w)
	}
}

// DocTable checks the key table of the calling package's doc.go against its section's defaults
// (configs.DocTableErrors with the keys prefix + toml tag, e.g. "rerank."): every key documented
// with its default, no row naming a key the section lacks.
func DocTable(t *testing.T, prefix string, defaults any) {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range configs.DocTableErrors(src, prefix, defaults) {
		t.Errorf("doc.go: %s", e)
	}
}

// LoadText writes text to path (its directory made) and loads it as a recipe: the recipe
// tests of the kinds' own sections, whose errors name the file, line and key.
func LoadText(t *testing.T, path, text string) (*configs.Recipe, error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return configs.Load(path)
}
