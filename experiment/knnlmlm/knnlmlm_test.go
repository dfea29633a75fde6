package knnlmlm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/knnlm"
	"github.com/ragtrain/ragtrain/model"
)

// tinyDocs is the tiny corpus: d0-d3 cited by dev claims, d4-d6 by test claims (d6 by a dev
// claim too: a test abstract), d7-d14 by none (the datastore). Every abstract starts with its
// own word, so no two abstracts share a prefix (a shared prefix gives equal keys).
var tinyDocs = []struct{ id, text string }{
	{"d0", "air flows over a thin wing at high speed and the pressure falls along the wing"},
	{"d1", "heat moves through the boundary layer of a flat plate in a steady flow of air"},
	{"d2", "shock waves form ahead of a blunt body when the flow is faster than sound"},
	{"d3", "pressure on the surface of a cone in a supersonic stream of air"},
	{"d4", "flow of air over a thin wing at high speed and the heat of the boundary layer"},
	{"d5", "waves in a stream of air over a flat plate at high speed"},
	{"d6", "the boundary layer of a cone in a flow faster than sound"},
	{"d7", "a thin wing in a flow of air at high speed has a low pressure along the wing"},
	{"d8", "boundary layers of flat plates in steady flows of air carry heat"},
	{"d9", "blunt bodies in a flow faster than sound have shock waves ahead of them"},
	{"d10", "cones in supersonic streams of air have a pressure on the surface"},
	{"d11", "high speed flow over a wing gives heat in the boundary layer"},
	{"d12", "streams of air over flat plates at high speed make waves"},
	{"d13", "surface pressure of a cone in a steady stream of air"},
	{"d14", "speed of sound in air and the flow over a thin wing"},
}

// tinyData writes the tiny BEIR directory.
func tinyData(t *testing.T, dir string) {
	t.Helper()
	var corpus, queries strings.Builder
	for _, d := range tinyDocs {
		b, _ := json.Marshal(map[string]string{"_id": d.id, "title": "", "text": d.text})
		corpus.Write(append(b, '\n'))
	}
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		fmt.Fprintf(&queries, "{\"_id\": %q, \"text\": \"a claim about flow %s\"}\n", q, q)
	}
	files := map[string]string{
		"corpus.jsonl":    corpus.String(),
		"queries.jsonl":   queries.String(),
		"qrels/dev.tsv":   "query-id\tcorpus-id\tscore\nq1\td0\t1\nq1\td1\t1\nq2\td2\t1\nq2\td3\t1\nq2\td6\t1\n",
		"qrels/test.tsv":  "query-id\tcorpus-id\tscore\nq3\td4\t1\nq3\td5\t1\nq4\td6\t1\n",
		"qrels/train.tsv": "query-id\tcorpus-id\tscore\nq1\td7\t1\n", // read by no one: [data] wants the file
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tinyRecipe is a kind = "knnlm_lm" recipe over the tiny corpus with testkit's tiny random
// LLaMA (H = 16, context 64): 8 datastore abstracts in shards of 3, k = 8, float32 keys; the
// lines of extra ("key = value") go into [knnlm_lm], replacing those keys.
func tinyRecipe(t *testing.T, extra string) *configs.Recipe {
	t.Helper()
	dir := t.TempDir()
	tinyData(t, filepath.Join(dir, "data"))
	sec := extra
	for _, l := range []string{"k = 8", "temperatures = [0.5, 2.0]", "lambdas = [0.25, 0.5]", "precision = \"float32\"", "abstract_tokens = 24", "shard_docs = 3"} {
		if !strings.Contains("\n"+extra, "\n"+strings.SplitN(l, " ", 2)[0]+" =") {
			sec += l + "\n"
		}
	}
	text := fmt.Sprintf(`kind = "knnlm_lm"
name = "tiny-knnlm-lm"
seed = 7
output_dir = %q
[data]
dir = %q
[knnlm_lm]
lm = %q
%s`, filepath.Join(dir, "runs"), filepath.Join(dir, "data"), testkit.TinyLlamaGGUF(t, dir, 64), sec)
	return testkit.WriteRecipe(t, dir, "recipe.toml", text)
}

func runTiny(t *testing.T, rec *configs.Recipe) (string, map[string]float64) {
	t.Helper()
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// loaded is a run's stages up to the split (the LM, the tokenized abstracts), for the tests.
func loaded(t *testing.T, rec *configs.Recipe) *lmRun {
	t.Helper()
	r := &lmRun{rec: rec, c: Of(rec), o: experiment.Options{Out: io.Discard, Progress: io.Discard}, metrics: map[string]float64{}}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	if err := r.split(); err != nil {
		t.Fatal(err)
	}
	return r
}

// stepwise runs seq through the decoder one token at a time (decoding steps over a cache,
// gemv kernels, not the prefill of the kind) and returns, for t = 0..len-2, log p(seq[t+1] |
// seq[:t+1]) by a float64 log-softmax computed here, and the key of position t.
func stepwise(t *testing.T, m *model.Llama, seq []int) ([]float64, [][]float32) {
	t.Helper()
	d, err := model.NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	d.KeepKeys = true
	c, err := d.NewCache(len(seq))
	if err != nil {
		t.Fatal(err)
	}
	var lps []float64
	var keys [][]float32
	for i := 0; i+1 < len(seq); i++ {
		out, err := d.Forward([]*model.LlamaCache{c}, [][]int{{seq[i]}}, false)
		if err != nil {
			t.Fatal(err)
		}
		mx := math.Inf(-1)
		for _, x := range out[0] {
			mx = math.Max(mx, float64(x))
		}
		var z float64
		for _, x := range out[0] {
			z += math.Exp(float64(x) - mx)
		}
		lps = append(lps, float64(out[0][seq[i+1]])-mx-math.Log(z))
		keys = append(keys, slices.Clone(d.Keys))
	}
	return lps, keys
}

// TestPerplexityByHand: at λ = 0 the kind's test perplexity is the LM's own, computed here
// token by token from decoding steps; at the dev-chosen (T, λ) it is the perplexity of
// λ p_kNN + (1 - λ) p_LM with p_kNN from a brute-force float64 search of the store the run
// wrote (eq. 2-3 by hand); and the kNN-LM differs from the LM (λ > 0 was scored).
func TestPerplexityByHand(t *testing.T) {
	rec := tinyRecipe(t, "")
	dir, m := runTiny(t, rec)
	r := loaded(t, rec)
	st, err := knnlm.NewStore(r.lm.Cfg.Hidden, knnlm.Float32)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := readManifest(filepath.Join(dir, DatastoreDir), datastoreHash(r.sha, r.c, rec.Data.TitleField, r.storeIDs))
	if err != nil || mf == nil {
		t.Fatalf("manifest: %v", err)
	}
	for _, e := range mf.Shards {
		if err := loadShard(filepath.Join(dir, DatastoreDir), e, st); err != nil {
			t.Fatal(err)
		}
	}
	T, lam := m["knnlm/temperature"], m["knnlm/lambda"]
	var nllLM, nllKNN float64
	n := 0
	for _, id := range r.tstIDs {
		lps, keys := stepwise(t, r.lm, r.seqs[id])
		for i, lp := range lps {
			target := r.seqs[id][i+1]
			type cand struct {
				d float64
				v int32
			}
			var cs []cand
			key := make([]float32, st.Dim)
			for row := range st.Len() {
				st.Key(row, key)
				var d float64
				for j, x := range key {
					d += (float64(x) - float64(keys[i][j])) * (float64(x) - float64(keys[i][j]))
				}
				cs = append(cs, cand{d, st.Values[row]})
			}
			sort.SliceStable(cs, func(a, b int) bool { return cs[a].d < cs[b].d })
			cs = cs[:r.c.K]
			var num, z float64
			for _, c := range cs {
				w := math.Exp(-(c.d - cs[0].d) / T)
				z += w
				if int(c.v) == target {
					num += w
				}
			}
			nllLM -= lp
			nllKNN -= math.Log(lam*num/z + (1-lam)*math.Exp(lp))
			n++
		}
	}
	if n == 0 || float64(n) != m["eval/test_tokens"] {
		t.Fatalf("%d test tokens by hand, %v in metrics.json", n, m["eval/test_tokens"])
	}
	wantLM, wantKNN := math.Exp(nllLM/float64(n)), math.Exp(nllKNN/float64(n))
	for _, c := range []struct {
		key  string
		want float64
	}{{"lm/ppl_test", wantLM}, {"knnlm/ppl_test.lambda=0", wantLM}, {"knnlm/ppl_test", wantKNN}} {
		if got := m[c.key]; math.Abs(got-c.want) > 1e-4*c.want {
			t.Errorf("%s = %.8f, by hand %.8f", c.key, got, c.want)
		}
	}
	if !(lam > 0) || math.Abs(wantKNN-wantLM) < 1e-3 {
		t.Errorf("λ = %v chosen, kNN-LM %v vs LM %v: the kNN-LM changed nothing", lam, wantKNN, wantLM)
	}
	if m["lm/ppl_dev"] < m["knnlm/ppl_dev"] {
		t.Errorf("dev: the chosen λ gives %v, above λ = 0's %v", m["knnlm/ppl_dev"], m["lm/ppl_dev"])
	}
}

// TestHeldOutExcluded: the abstracts dev and test claims cite (d0-d6) are out of the datastore:
// its bytes are those of a store built over d7-d14 alone, and no key of a held-out abstract is
// in it.
func TestHeldOutExcluded(t *testing.T) {
	rec := tinyRecipe(t, "precision = \"float16\"\n")
	dir, m := runTiny(t, rec)
	r := loaded(t, rec)
	want := []string{"d7", "d8", "d9", "d10", "d11", "d12", "d13", "d14"}
	if !slices.Equal(r.storeIDs, want) || !slices.Equal(r.devIDs, []string{"d0", "d1", "d2", "d3"}) || !slices.Equal(r.tstIDs, []string{"d4", "d5", "d6"}) {
		t.Fatalf("datastore %v, dev %v, test %v", r.storeIDs, r.devIDs, r.tstIDs)
	}
	var seqs [][]int
	for _, id := range want {
		seqs = append(seqs, r.seqs[id])
	}
	ref, err := knnlm.BuildLlama(r.dec, seqs, knnlm.Float16, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := knnlm.NewStore(r.lm.Cfg.Hidden, knnlm.Float16)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := readManifest(filepath.Join(dir, DatastoreDir), datastoreHash(r.sha, r.c, rec.Data.TitleField, r.storeIDs))
	if err != nil || mf == nil || len(mf.Shards) != 3 {
		t.Fatalf("manifest %+v: %v", mf, err)
	}
	for _, e := range mf.Shards {
		if err := loadShard(filepath.Join(dir, DatastoreDir), e, got); err != nil {
			t.Fatal(err)
		}
	}
	if string(encodeShard(got)) != string(encodeShard(ref)) || m["datastore/pairs"] != float64(ref.Len()) {
		t.Fatalf("the datastore (%d pairs) is not the store of d7-d14 (%d pairs)", got.Len(), ref.Len())
	}
	checked := 0
	for _, id := range append(slices.Clone(r.devIDs), r.tstIDs...) {
		_, keys := stepwise(t, r.lm, r.seqs[id])
		for i, k := range keys {
			if slices.ContainsFunc(seqs, func(s []int) bool { return len(s) > i && slices.Equal(s[:i+1], r.seqs[id][:i+1]) }) {
				continue // a datastore abstract starts with the same tokens: the same key, rightly
			}
			checked++
			key := make([]float32, got.Dim)
			for row := range got.Len() {
				got.Key(row, key)
				var d float64 // in float64: no cancellation
				for j, x := range key {
					d += (float64(x) - float64(k[j])) * (float64(x) - float64(k[j]))
				}
				if d < 1e-3 {
					t.Errorf("abstract %s position %d: stored key %d at squared distance %v", id, i, row, d)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("%d held-out keys checked", checked)
	}
}

// TestResumesExactly: a build interrupted after one of three shards and resumed writes the
// uninterrupted run's shards, manifest and metrics byte for byte (timings aside) and reads the
// shard it had; a changed shard is refused at the next resume, naming the file.
func TestResumesExactly(t *testing.T) {
	rec := tinyRecipe(t, "precision = \"float16\"\nsearch = \"hnsw\"\n")
	full, resumed, out := testkit.Resume(t, rec, PhaseName, 1)
	if !strings.Contains(out, "resume: datastore: 1 of 3 shards") {
		t.Errorf("the resumed run does not read its shard:\n%s", out)
	}
	for _, f := range []string{"shard-00000.bin", "shard-00001.bin", "shard-00002.bin"} {
		testkit.SameFile(t, filepath.Join(full, DatastoreDir, f), filepath.Join(resumed, DatastoreDir, f))
	}
	testkit.SameMetrics(t, "", full, resumed, testkit.Untimed)
	a, _ := os.ReadFile(filepath.Join(full, DatastoreDir, ManifestFile))
	b, _ := os.ReadFile(filepath.Join(resumed, DatastoreDir, ManifestFile))
	if !strings.Contains(string(a), "shard-00002.bin") || strings.Count(string(a), "sha256") != strings.Count(string(b), "sha256") {
		t.Errorf("manifests:\n%s\n%s", a, b)
	}
	path := filepath.Join(resumed, DatastoreDir, "shard-00001.bin")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-5] ^= 1
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(resumed, experiment.MetricsFile))
	_, err = experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: resumed, Out: io.Discard, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "shard-00001.bin") || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("a changed shard: resumed with err = %v", err)
	}
}

// TestScoringResumesExactly: a run stopped while scoring (after the first dev abstract, and
// after the first test abstract) and resumed ends with the uninterrupted run's metrics (timings
// aside), reading the sums it had; a scoring state of anything else is refused, naming its file.
func TestScoringResumesExactly(t *testing.T) {
	rec := tinyRecipe(t, "")
	_, m := runTiny(t, rec)
	dev := int(m["eval/dev_docs"])
	if dev < 2 || m["eval/test_docs"] < 2 {
		t.Fatalf("tiny run: %v dev and %v test abstracts", dev, m["eval/test_docs"])
	}
	for _, c := range []struct {
		at   int
		want string
	}{{1, fmt.Sprintf("resume: scoring dev: 1 of %d abstracts", dev)}, {dev + 1, "resume: scoring test: 1 of"}} {
		full, resumed, out := testkit.Resume(t, rec, ScorePhaseName, c.at)
		if !strings.Contains(out, c.want) || !strings.Contains(out, "resume: datastore: 3 of 3 shards") {
			t.Errorf("stopped after %d abstracts, the resumed run says:\n%s", c.at, out)
		}
		testkit.SameMetrics(t, fmt.Sprintf("stopped after %d: ", c.at), full, resumed, testkit.Untimed)
	}
	broken, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard, InterruptPhase: ScorePhaseName, InterruptAt: 1})
	if err == nil {
		t.Fatal("not interrupted")
	}
	path := filepath.Join(broken, ScoreDir, "dev.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(raw), `"hash":"`, `"hash":"0`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: broken, Out: io.Discard, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another") {
		t.Errorf("a state of other scoring: resumed with err = %v", err)
	}
	if err := os.WriteFile(path, raw[:len(raw)/2], 0o644); err != nil { // a cut file
		t.Fatal(err)
	}
	_, err = experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: broken, Out: io.Discard, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a cut scoring state: resumed with err = %v", err)
	}
}

// TestRecipeBounds: every size the section reads is bounded before anything is allocated, the
// error naming the key; the datastore's bytes and the LM's context are checked before any pass.
func TestRecipeBounds(t *testing.T) {
	for _, c := range []struct{ key, value string }{
		{"k", "0"}, {"k", "5000"}, {"temperatures", "[]"}, {"temperatures", "[0.0]"}, {"temperatures", "[1.0, 1.0]"},
		{"lambdas", "[1.5]"}, {"lambdas", "[-0.1]"}, {"precision", "\"int8\""}, {"search", "\"ivf\""}, {"hnsw_m", "1"},
		{"hnsw_m", "200"}, {"hnsw_ef_search", "0"}, {"abstract_tokens", "1"}, {"abstract_tokens", "10000"}, {"corpus_cap", "-1"},
		{"dev_docs", "-1"}, {"test_docs", "-2"}, {"shard_docs", "0"}, {"shard_docs", "5000"}, {"max_datastore_bytes", "0"},
	} {
		dir := t.TempDir()
		text := fmt.Sprintf("kind = \"knnlm_lm\"\nname = \"x\"\n[data]\ndir = %q\n[knnlm_lm]\nlm = %q\n%s = %s\n",
			testkit.SciFactDir(t), testkit.TinyLlamaGGUF(t, dir, 64), c.key, c.value)
		if _, err := testkit.LoadText(t, filepath.Join(dir, "r.toml"), text); err == nil || !strings.Contains(err.Error(), "knnlm_lm."+c.key) {
			t.Errorf("%s = %s: err = %v", c.key, c.value, err)
		}
	}
	for _, c := range []struct{ extra, key string }{
		{"max_datastore_bytes = 1000\n", "knnlm_lm.max_datastore_bytes"}, // 8 abstracts' pairs at H = 16 are more
		{"abstract_tokens = 100\n", "knnlm_lm.abstract_tokens"},          // over the tiny LM's context of 64
	} {
		rec := tinyRecipe(t, c.extra)
		_, err := experiment.Run(context.Background(), rec, experiment.Options{Out: io.Discard, Progress: io.Discard})
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: err = %v", strings.TrimSpace(c.extra), err)
		}
	}
}

// TestDocTable: doc.go documents every key of [knnlm_lm] with its default.
func TestDocTable(t *testing.T) { testkit.DocTable(t, "knnlm_lm.", defaultConfig()) }
