package retriever

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
)

// runANN runs the slice test recipe over dir's synthetic data with extra appended and returns
// the run directory and the output.
func runANN(t *testing.T, dir, name, extra string) (string, string) {
	t.Helper()
	sub := filepath.Join(dir, name)
	os.MkdirAll(sub, 0o755)
	vars := map[string]string{"OUT": filepath.Join(sub, "runs"), "DATA": filepath.Join(dir, "data")}
	rec := testkit.Recipe(t, "slice", filepath.Join(sub, "recipe.toml"), vars, extra)
	var out bytes.Buffer
	runDir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out.String())
	}
	return runDir, out.String()
}

// runFiles are the files of a run that its rankings determine: the TREC runs and the mined
// examples (when mined before training).
func runFiles(t *testing.T, runDir string) []string {
	t.Helper()
	var files []string
	if _, err := os.Stat(filepath.Join(runDir, ExamplesFile)); err == nil {
		files = append(files, ExamplesFile)
	}
	runs, _ := os.ReadDir(filepath.Join(runDir, "runs"))
	for _, e := range runs {
		files = append(files, filepath.Join("runs", e.Name()))
	}
	if len(files) < 3 {
		t.Fatalf("%s wrote %v", runDir, files)
	}
	return files
}

func sameFiles(t *testing.T, what, a, b string) {
	t.Helper()
	for _, f := range runFiles(t, a) {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s: %s differs (%d and %d bytes)", what, f, len(x), len(y))
		}
	}
}

// rankingRecall is the mean over queries of |got's top k ∩ want's top k| / |want's top k|.
func rankingRecall(got, want eval.Run, k int) float64 {
	s := 0.0
	for q, w := range want {
		in := map[string]bool{}
		for _, h := range w[:min(k, len(w))] {
			in[h.DocID] = true
		}
		n := 0
		for _, h := range got[q][:min(k, len(got[q]))] {
			if in[h.DocID] {
				n++
			}
		}
		s += float64(n) / float64(len(in))
	}
	return s / float64(len(want))
}

// index.ann_threshold: above the corpus size the run is today's exact run byte for byte
// (metrics, TREC runs, mined examples, no HNSW line); at or below it the dense evaluation and
// the dense mining of the model before training search an HNSW graph, whose rankings find the
// exact ones' top 10 and top 100 (recall against the exact run of the same model: the
// negatives are BM25's, so both runs train the same weights), give metrics within 0.01 of
// exact, say so in the output and metrics.json, and are the same bytes on a second run.
func TestANNThreshold(t *testing.T) {
	const n = 3000
	dir := synthDir(t, n, 150)
	const sys = "systems = [\"bm25\", \"dense\", \"rrf\", \"zeroshot\"]\n" // the slice recipe ends with [eval]
	exact, outExact := runANN(t, dir, "exact", sys)
	above, outAbove := runANN(t, dir, "above", sys+fmt.Sprintf("[index]\nann_threshold = %d\n", n+1))
	// ann_m 8 and ann_ef_search 16 (max(16, depth 200) candidates for the depth-200 ranking):
	// a sparser graph than the default, so the test sees approximation.
	const hnswKeys = "[index]\nann_threshold = 1000\nann_m = 8\nann_ef_construction = 40\nann_ef_search = 16\n"
	hnsw, outHNSW := runANN(t, dir, "hnsw", sys+hnswKeys)
	again, _ := runANN(t, dir, "again", sys+hnswKeys)

	me, err := experiment.ReadMetrics(exact)
	if err != nil {
		t.Fatal(err)
	}
	ma, err := experiment.ReadMetrics(above)
	if err != nil {
		t.Fatal(err)
	}
	mh, err := experiment.ReadMetrics(hnsw)
	if err != nil {
		t.Fatal(err)
	}
	if qe, qa := testkit.Quality(me), testkit.Quality(ma); len(qe) < 12 || !reflect.DeepEqual(qe, qa) {
		t.Errorf("ann_threshold above the corpus changed the metrics:\nexact %v\nabove %v", qe, qa)
	}
	sameFiles(t, "ann_threshold above the corpus", exact, above)
	for _, out := range []string{outExact, outAbove} {
		if strings.Contains(out, "HNSW") {
			t.Errorf("an exact run mentions HNSW:\n%s", out)
		}
	}
	for _, k := range []string{"dense/hnsw_passages", "dense/hnsw_build_seconds"} {
		if _, ok := ma[k]; ok {
			t.Errorf("the exact run's metrics.json has %s", k)
		}
	}

	for _, want := range []string{
		"zeroshot: HNSW over 3000 passages (M 8, efConstruction 40, efSearch 16), built in ",
		"dense: HNSW over 3000 passages (M 8, efConstruction 40, efSearch 16), built in ",
		"the ranking is approximate (index.ann_threshold)",
	} {
		if !strings.Contains(outHNSW, want) {
			t.Errorf("the HNSW run's output lacks %q:\n%s", want, outHNSW)
		}
	}
	if mh["dense/hnsw_passages"] != n || mh["dense/hnsw_m"] != 8 || mh["dense/hnsw_ef_construction"] != 40 || mh["dense/hnsw_ef_search"] != 16 || !(mh["dense/hnsw_build_seconds"] > 0) {
		t.Errorf("metrics.json of the HNSW run: %v", mh)
	}
	for _, m := range []string{"dense/nDCG@10", "dense/MRR@10", "dense/Recall@100", "dense/MAP", "rrf/nDCG@10", "zeroshot/nDCG@10"} {
		if d := math.Abs(mh[m] - me[m]); d > 0.01 || me[m] == 0 {
			t.Errorf("%s: HNSW %.4f, exact %.4f (difference %.4f, want <= 0.01)", m, mh[m], me[m], d)
		}
	}
	if mh["bm25/nDCG@10"] != me["bm25/nDCG@10"] {
		t.Errorf("bm25/nDCG@10 changed: %v against %v", mh["bm25/nDCG@10"], me["bm25/nDCG@10"])
	}
	for _, sys := range []string{"dense", "zeroshot"} {
		got, err := eval.ReadTREC(filepath.Join(hnsw, "runs", "test."+sys+".trec"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := eval.ReadTREC(filepath.Join(exact, "runs", "test."+sys+".trec"))
		if err != nil {
			t.Fatal(err)
		}
		r10, r100 := rankingRecall(got, want, 10), rankingRecall(got, want, 100)
		t.Logf("%s: recall of the exact ranking: @10 %.4f, @100 %.4f", sys, r10, r100)
		if r10 < 0.95 || r100 < 0.95 {
			t.Errorf("%s: recall of the exact ranking @10 %.4f, @100 %.4f; want >= 0.95", sys, r10, r100)
		}
	}
	sameFiles(t, "two HNSW runs with the same seed", hnsw, again)
}

// Dense hard-negative mining (sampler.negative_source = "dense_refresh") from an HNSW graph:
// every refresh says so in the output and in its log.jsonl line ("search": "hnsw"), and a
// second run with the same seed mines the same negatives and ranks the same, byte for byte.
func TestANNDenseRefresh(t *testing.T) {
	dir := synthDir(t, 1500, 100)
	const extra = "[sampler]\nnegative_source = \"dense_refresh\"\nrefresh_every = 30\n[index]\nann_threshold = 1500\n"
	a, out := runANN(t, dir, "a", extra)
	b, _ := runANN(t, dir, "b", extra)
	if want := "mining: step 30: the index is HNSW over 1500 passages (M 16, efConstruction 200, efSearch 64)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	log, err := os.ReadFile(filepath.Join(a, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(log), `"search":"hnsw"`); got != 2 { // steps 0 and 30 of 60
		t.Errorf("log.jsonl has %d refresh lines with \"search\":\"hnsw\", want 2", got)
	}
	sameFiles(t, "two HNSW runs with the same seed", a, b)
	for _, step := range []int{0, 30} {
		testkit.SameFile(t, miningPath(a, step), miningPath(b, step))
	}
}

// index.ann_threshold over a streamed corpus (index.stream_above): above the corpus size the
// run is today's exact shard-by-shard run (metrics, TREC runs, mined examples, no HNSW line);
// at or below it the final dense evaluation reads the embedding shards back into an HNSW graph,
// says so in the output ("from 1 shard", its MiB) and in metrics.json dense/hnsw_*, finds the
// exact ranking's top 10 and top 100 (recall >= 0.95), gives metrics within 0.01 of exact, is
// the same bytes on a second run, and ranks exactly as the loaded corpus's HNSW run (the same
// vectors, so the same graph).
func TestANNStreamedCorpus(t *testing.T) {
	const n = 3000
	dir := synthDir(t, n, 150)
	const stream = "[index]\nstream_above = 10\n"
	exact, outExact := runANN(t, dir, "exact", stream)
	above, outAbove := runANN(t, dir, "above", stream+fmt.Sprintf("ann_threshold = %d\n", n+1))
	const hnswKeys = "ann_threshold = 1000\nann_m = 8\nann_ef_construction = 40\nann_ef_search = 16\n"
	hnsw, outHNSW := runANN(t, dir, "hnsw", stream+hnswKeys)
	again, _ := runANN(t, dir, "again", stream+hnswKeys)
	loaded, _ := runANN(t, dir, "loaded", "[index]\n"+hnswKeys)

	me, err := experiment.ReadMetrics(exact)
	if err != nil {
		t.Fatal(err)
	}
	ma, err := experiment.ReadMetrics(above)
	if err != nil {
		t.Fatal(err)
	}
	mh, err := experiment.ReadMetrics(hnsw)
	if err != nil {
		t.Fatal(err)
	}
	if qe, qa := testkit.Quality(me), testkit.Quality(ma); len(qe) < 12 || !reflect.DeepEqual(qe, qa) {
		t.Errorf("ann_threshold above the streamed corpus changed the metrics:\nexact %v\nabove %v", qe, qa)
	}
	sameFiles(t, "ann_threshold above the streamed corpus", exact, above)
	for _, out := range []string{outExact, outAbove} {
		if strings.Contains(out, "HNSW") || !strings.Contains(out, "(index.stream_above = 10)") {
			t.Errorf("an exact streamed run mentions HNSW or is not streamed:\n%s", out)
		}
	}
	if _, ok := ma["dense/hnsw_passages"]; ok {
		t.Error("the exact streamed run's metrics.json has dense/hnsw_passages")
	}

	if !strings.Contains(outHNSW, "dense: HNSW over 3000 passages (M 8, efConstruction 40, efSearch 16) from 1 shard, built in ") ||
		!strings.Contains(outHNSW, " MiB; the ranking is approximate (index.ann_threshold)") {
		t.Errorf("the streamed HNSW run's output lacks its HNSW line:\n%s", outHNSW)
	}
	if mh["dense/hnsw_passages"] != n || mh["dense/hnsw_m"] != 8 || mh["dense/hnsw_ef_construction"] != 40 || mh["dense/hnsw_ef_search"] != 16 || !(mh["dense/hnsw_build_seconds"] > 0) {
		t.Errorf("metrics.json of the streamed HNSW run: %v", mh)
	}
	for _, m := range []string{"dense/nDCG@10", "dense/MRR@10", "dense/Recall@100", "dense/MAP", "rrf/nDCG@10"} {
		if d := math.Abs(mh[m] - me[m]); d > 0.01 || me[m] == 0 {
			t.Errorf("%s: HNSW %.4f, exact %.4f (difference %.4f, want <= 0.01)", m, mh[m], me[m], d)
		}
	}
	if mh["bm25/nDCG@10"] != me["bm25/nDCG@10"] {
		t.Errorf("bm25/nDCG@10 changed: %v against %v", mh["bm25/nDCG@10"], me["bm25/nDCG@10"])
	}
	got, err := eval.ReadTREC(filepath.Join(hnsw, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := eval.ReadTREC(filepath.Join(exact, "runs", "test.dense.trec"))
	if err != nil {
		t.Fatal(err)
	}
	r10, r100 := rankingRecall(got, want, 10), rankingRecall(got, want, 100)
	t.Logf("streamed dense: recall of the exact ranking: @10 %.4f, @100 %.4f; nDCG@10 HNSW %.4f, exact %.4f", r10, r100, mh["dense/nDCG@10"], me["dense/nDCG@10"])
	if r10 < 0.95 || r100 < 0.95 {
		t.Errorf("recall of the exact ranking @10 %.4f, @100 %.4f; want >= 0.95", r10, r100)
	}
	sameFiles(t, "two streamed HNSW runs with the same seed", hnsw, again)
	sameFiles(t, "the streamed and the loaded HNSW run", hnsw, loaded)
}
