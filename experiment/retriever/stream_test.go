package retriever

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/data/synth"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/index/shard"
	"github.com/ragtrain/ragtrain/tokenize/tokstore"
)

// synthDir writes a synthetic collection of n passages and q queries into a temporary
// directory's data/ and returns the directory.
func synthDir(t *testing.T, n, q int) string {
	t.Helper()
	dir := t.TempDir()
	c, err := synth.New(synth.Config{Passages: n, Queries: q, Seed: 11, Vocab: 3000, Topics: 40})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runSlice runs the slice test recipe over dir's data with index.stream_above = above.
func runSlice(t *testing.T, dir string, above int, name string) (string, error) {
	t.Helper()
	sub := filepath.Join(dir, name)
	os.MkdirAll(sub, 0o755)
	vars := map[string]string{"OUT": filepath.Join(sub, "runs"), "DATA": filepath.Join(dir, "data")}
	rec := testkit.Recipe(t, "slice", filepath.Join(sub, "recipe.toml"), vars, fmt.Sprintf("[index]\nstream_above = %d\n", above))
	var out bytes.Buffer
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	t.Logf("%s:\n%s", name, out.String())
	return runDir, err
}

// A corpus over index.stream_above is streamed (token store, texts on disk, BM25 built
// document by document, embedding shards searched shard by shard), and the run is the one
// loading it gives: the same metrics, the same TREC runs and mined examples, byte for byte.
func TestStreamedCorpusGivesTheLoadedRun(t *testing.T) {
	const n = 3000
	dir := synthDir(t, n, 150)
	loaded, err := runSlice(t, dir, 0, "loaded")
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := runSlice(t, dir, n-1, "streamed")
	if err != nil {
		t.Fatal(err)
	}
	// The streamed run holds its corpus on disk: n tokenized passages, n embeddings in shards.
	store, err := tokstore.Open(filepath.Join(streamed, StreamDir, TokensFile))
	if err != nil {
		t.Fatal(err)
	}
	if store.Len() != n {
		t.Errorf("token store holds %d passages, want %d", store.Len(), n)
	}
	store.Close()
	r, err := shard.Open(filepath.Join(streamed, StreamDir, ShardsDir))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != n || r.Dim() != 64 {
		t.Errorf("shards hold %d vectors of %d, want %d of 64", r.Len(), r.Dim(), n)
	}
	r.Close()
	if _, err := os.Stat(filepath.Join(loaded, StreamDir, TokensFile)); err == nil {
		t.Errorf("the loaded run (stream_above = 0) wrote %s", TokensFile)
	}

	ml, err := experiment.ReadMetrics(loaded)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := experiment.ReadMetrics(streamed)
	if err != nil {
		t.Fatal(err)
	}
	ql, qs := testkit.Quality(ml), testkit.Quality(ms)
	if len(ql) < 12 || !reflect.DeepEqual(ql, qs) {
		t.Errorf("metrics differ:\nloaded   %v\nstreamed %v", ql, qs)
	}
	if base := randomBaseline(t, filepath.Join(dir, "data")); ml["dense/nDCG@10"] < 5*base+0.03 {
		t.Errorf("dense nDCG@10 %.4f against the random ranking's %.4f: the planted passages are not found", ml["dense/nDCG@10"], base)
	}
	files := []string{ExamplesFile}
	runs, _ := os.ReadDir(filepath.Join(loaded, "runs"))
	for _, e := range runs {
		files = append(files, filepath.Join("runs", e.Name()))
	}
	if len(files) < 4 {
		t.Fatalf("loaded run wrote %v", files)
	}
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(loaded, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(streamed, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the loaded and the streamed run (%d and %d bytes)", f, len(a), len(b))
		}
	}
}

// A malformed corpus line fails the streamed run with the loaded run's error, file:line and
// field, before any run directory is made.
func TestStreamedCorpusMalformedLine(t *testing.T) {
	dir := synthDir(t, 200, 20)
	path := filepath.Join(dir, "data", "corpus.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	for _, c := range []struct{ line, want string }{
		{`{"_id": "d7", "title": 3, "text": "x"}` + "\n", `corpus.jsonl:8: `},
		{`{"_id": "d1", "text": "duplicate"}` + "\n", `corpus.jsonl:8: duplicate _id "d1" (first at line 2)`},
		{`{"_id": "d7", "text": "x"` + "\n", `corpus.jsonl:8: `},
	} {
		bad := append([]string(nil), lines...)
		bad[7] = c.line
		if err := os.WriteFile(path, []byte(strings.Join(bad, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errLoaded := runSlice(t, dir, 0, "loaded")
		_, errStreamed := runSlice(t, dir, 1, "streamed")
		if errLoaded == nil || errStreamed == nil {
			t.Fatalf("line %q: errors %v and %v, want both to fail", c.line, errLoaded, errStreamed)
		}
		if !strings.Contains(errStreamed.Error(), c.want) || errStreamed.Error() != errLoaded.Error() {
			t.Errorf("line %q: streamed error %q, loaded %q; want both %q", c.line, errStreamed, errLoaded, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "streamed", "runs")); err == nil {
			t.Errorf("line %q: the failed streamed run made a run directory", c.line)
		}
	}
}

// What a streamed corpus does not serve yet is refused, naming index.stream_above.
func TestStreamedCorpusRefusesSelection(t *testing.T) {
	dir := synthDir(t, 200, 20)
	sub := filepath.Join(dir, "sel")
	os.MkdirAll(sub, 0o755)
	vars := map[string]string{"OUT": filepath.Join(sub, "runs"), "DATA": filepath.Join(dir, "data")}
	rec := testkit.Recipe(t, "slice", filepath.Join(sub, "recipe.toml"), vars, "[index]\nstream_above = 10\n")
	rec.Eval.SelectMetric = "nDCG@10"
	_, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "index.stream_above: the corpus has 200 passages, more than 10") || !strings.Contains(err.Error(), "eval.select_metric") {
		t.Errorf("got %v, want the index.stream_above refusal naming eval.select_metric", err)
	}
}

func TestCountLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	for _, c := range []struct {
		text string
		want int
	}{{"", 0}, {"a", 1}, {"a\n", 1}, {"a\n\n \t\r\nb\r\n", 2}, {"\n\na\nb", 2}, {strings.Repeat("x", 3<<20) + "\n" + strings.Repeat("y\n", 5), 6}} {
		os.WriteFile(path, []byte(c.text), 0o644)
		if n, err := countLines(path); err != nil || n != c.want {
			t.Errorf("countLines(%.20q) = %d, %v; want %d", c.text, n, err, c.want)
		}
	}
}
