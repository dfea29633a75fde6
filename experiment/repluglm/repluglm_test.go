package repluglm

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/internal/teachercache"
	"github.com/ragtrain/ragtrain/model"
)

// tinyRecipe is a kind = "replug_lm" recipe over the 200-passage Cranfield slice with a tiny
// random BERT (1 layer, H 16) and the tiny random LLaMA of testkit (context 256): the machinery
// in seconds. 8 training claims, k = 3, 6 steps of 4; extra goes into [replug_lm].
func tinyRecipe(t *testing.T, extra string) *configs.Recipe {
	t.Helper()
	dir := testkit.NewSlice(t)
	text := fmt.Sprintf(`kind = "replug_lm"
name = "tiny-replug-lm"
seed = 7
output_dir = %q
[data]
dir = %q
[tokenizer]
train = true
vocab_size = 600
max_length = 24
query_max_length = 12
[model]
encoder = "transformer"
hidden = 16
layers = 1
heads = 2
ffn = 32
max_position = 32
[replug_lm]
lm = %q
top_k = 3
tau_r = 0.1
tau_lm = 2.0
abstract_tokens = 40
claim_tokens = 16
train_claims = 8
cache_every = 3
%s
[train]
steps = 6
batch_size = 4
lr = 1e-3
warmup_steps = 1
log_every = 1
checkpoint_every = 3
[eval]
splits = ["test"]
systems = ["bm25", "zeroshot", "finetuned"]
depth = 100
metrics = ["nDCG@10", "Recall@100"]
`, filepath.Join(dir, "runs"), filepath.Join(dir, "data"), testkit.TinyLlamaGGUF(t, dir, 256), extra)
	return testkit.WriteRecipe(t, dir, "recipe.toml", text)
}

// prepared runs a recipe's stages up to the LM scores (a run directory in a temporary
// output_dir), for the tests of the stages.
func prepared(t *testing.T, rec *configs.Recipe) *lmRun {
	t.Helper()
	r := &lmRun{rec: rec, c: Of(rec), o: experiment.Options{Out: io.Discard, Progress: io.Discard}, seed: uint64(rec.Seed)}
	for _, stage := range []func() error{r.load, r.open, r.datastore, r.candidates, func() error { return r.score(context.Background()) }} {
		if err := stage(); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestLogSoftmaxAt against hand-computed values: log softmax([0, ln 3])[1] = ln(3/4).
func TestLogSoftmaxAt(t *testing.T) {
	l := []float32{0, float32(math.Log(3))}
	if got, want := logSoftmaxAt(l, 1), math.Log(0.75); math.Abs(got-want) > 1e-7 {
		t.Errorf("log softmax [0, ln 3][1] = %v, want ln 0.75 = %v", got, want)
	}
	if got, want := logSoftmaxAt([]float32{1000, 1000}, 0), math.Log(0.5); math.Abs(got-want) > 1e-12 {
		t.Errorf("large logits: %v, want %v", got, want)
	}
}

// TestScoreIsOneSequence: the scorer's log-likelihood of a claim (prefix, then the claim's
// tokens in a second pass over the cache) equals the sum of log-softmax over the claim's
// positions of one forward pass over the whole sequence, and a batch of abstracts scores each
// as it scores alone.
func TestScoreIsOneSequence(t *testing.T) {
	m, tok, err := export.OpenLlamaGGUF(testkit.TinyLlamaGGUF(t, t.TempDir(), 256))
	if err != nil {
		t.Fatal(err)
	}
	c := defaultConfig()
	c.AbstractTokens, c.ClaimTokens = 40, 16
	s, err := newScorer(m, tok, &c)
	if err != nil {
		t.Fatal(err)
	}
	abstracts := []string{"the flow of air over a thin wing at high speed", "heat transfer in a boundary layer", "shock waves"}
	claim := "a wing in a supersonic flow"
	got, err := s.score(abstracts, claim)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := model.NewLlamaDecoder(m)
	if err != nil {
		t.Fatal(err)
	}
	y := s.claimTokens(claim)
	if len(y) < 2 {
		t.Fatalf("claim of %d tokens", len(y))
	}
	for i, a := range abstracts {
		seq := append(s.prefix(a), y...)
		cache, err := dec.NewCache(len(seq))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := dec.Forward([]*model.LlamaCache{cache}, [][]int{seq}, true)
		if err != nil {
			t.Fatal(err)
		}
		V := m.Cfg.Vocab
		var want float64
		for j := len(seq) - len(y); j < len(seq); j++ {
			want += logSoftmaxAt(rows[0][(j-1)*V:j*V], seq[j])
		}
		if math.Abs(got[i]-want) > 1e-4*math.Max(1, math.Abs(want)) || !(want < 0) {
			t.Errorf("abstract %d: scorer %v, one pass %v", i, got[i], want)
		}
		alone, err := s.score([]string{a}, claim)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(alone[0]-got[i]) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("abstract %d: alone %v, in the batch %v", i, alone[0], got[i])
		}
	}
	// cut at AbstractTokens and ClaimTokens, and counted
	s.cutAbstracts, s.cutClaims = 0, 0
	if p := s.prefix(strings.Repeat("flow ", 100)); len(p) != 40+len(s.sep) || s.cutAbstracts != 1 {
		t.Errorf("a long abstract: prefix of %d tokens (want %d), %d counted as cut", len(p), 40+len(s.sep), s.cutAbstracts)
	}
	if y := s.claimTokens(strings.Repeat("wing ", 50)); len(y) != 16 || s.cutClaims != 1 {
		t.Errorf("a long claim: %d tokens, %d counted as cut", len(y), s.cutClaims)
	}
	// over the LM's context: refused before anything is allocated
	c.AbstractTokens = 250
	if _, err := newScorer(m, tok, &c); err == nil || !strings.Contains(err.Error(), "replug_lm.abstract_tokens") {
		t.Errorf("abstract_tokens over the context: err = %v", err)
	}
}

// TestLossByHand: the task's loss at step 0 equals KL(Q_LM || P_R) computed here in float64
// from the query tower's vectors, the datastore's and the cached LM scores, with P_R =
// softmax(cos / gamma) and Q_LM = softmax(ll / beta) (eq. 2-3), averaged over the batch.
func TestLossByHand(t *testing.T) {
	rec := tinyRecipe(t, "")
	r := prepared(t, rec)
	tk, err := newTask(r.m, r.tok, r.x, r.qs, r.cands, r.lmLL, 4, r.c.TauLM, r.seed)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	batch := tk.Next(0)
	texts := make([]string, len(batch))
	for i, qi := range batch {
		texts[i] = r.qs[qi].Query
	}
	qv, err := r.x.EncodeQueries(r.m, r.tok, texts) // normalised rows
	if err != nil {
		t.Fatal(err)
	}
	loss, _, err := tk.Step(0)
	if err != nil {
		t.Fatal(err)
	}
	dim, K := r.x.Dim, r.c.TopK
	var want float64
	for b, qi := range batch {
		s, l := make([]float64, K), make([]float64, K)
		for k, row := range r.cands[qi] {
			var dot float64
			for j := range dim {
				dot += float64(qv[b*dim+j]) * float64(r.x.Vecs[row*dim+j])
			}
			s[k], l[k] = dot/r.c.TauR, float64(r.lmLL[qi][k])/r.c.TauLM
		}
		pr, q := softmax(s), softmax(l)
		for k := range K {
			if q[k] > 0 {
				want += q[k] * (math.Log(q[k]) - math.Log(pr[k]))
			}
		}
	}
	want /= float64(len(batch))
	if math.Abs(loss-want) > 1e-4*math.Max(1, want) || !(want > 0) {
		t.Errorf("step 0 loss %v, by hand KL(Q_LM || P_R) = %v", loss, want)
	}
}

func softmax(x []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, v)
	}
	out := make([]float64, len(x))
	var sum float64
	for i, v := range x {
		out[i] = math.Exp(v - mx)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// TestResumesExactly: the tiny run interrupted at step 2 and resumed ends with the
// uninterrupted run's checkpoint bit for bit, its metrics, TREC runs and LM cache byte for
// byte; the resumed run scores no pair again (all from the cache). A cache cut short, edited,
// or of another layout (instruction) is refused, naming the file.
func TestResumesExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	rec := tinyRecipe(t, "")
	full, resumed, out := testkit.Resume(t, rec, PhaseName, 2)
	testkit.SameCheckpoint(t, "", full, resumed, 6)
	testkit.SameMetrics(t, "", full, resumed, testkit.Untimed)
	for _, f := range []string{"runs/test.replug.trec", "runs/test.zeroshot.trec", "runs/test.bm25.trec", CacheFile} {
		testkit.SameFile(t, filepath.Join(full, f), filepath.Join(resumed, f))
	}
	if !strings.Contains(out, "lm: 0 (claim, abstract) pairs scored by the LM, 24 from "+CacheFile) {
		t.Errorf("the resumed run does not take the 8 x 3 scores from the cache:\n%s", out)
	}
	if !strings.Contains(out, "datastore: 200 passage vectors read from "+filepath.Join(resumed, DatastoreDir)+" (verified)") {
		t.Errorf("the resumed run does not read its datastore:\n%s", out)
	}
	cache := map[teachercache.Pair]float32{}
	n, err := teachercache.Read(filepath.Join(full, CacheFile), cacheKey(mustSHA(t, Of(rec).LM), Of(rec)), cache)
	if err != nil || n != 24 {
		t.Fatalf("cache: %d pairs, %v", n, err)
	}
	for k, v := range cache {
		if !(v < 0) {
			t.Errorf("pair %v: log-likelihood %v, want < 0", k, v)
		}
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"replug/nDCG@10", "zeroshot/nDCG@10", "bm25/nDCG@10"} {
		if v, ok := m[k]; !ok || v < 0 || v > 1 {
			t.Errorf("metrics.json %s = %v (present %v)", k, v, ok)
		}
	}
	lines := testkit.ReadLog(t, full)
	if len(lines) == 0 {
		t.Fatal("no log lines")
	}

	// a damaged cache: refused at the next resume, before training
	damage := func(name string, edit func(string) string) {
		t.Helper()
		path := filepath.Join(resumed, CacheFile)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(resumed, experiment.MetricsFile))
		_, err = experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: resumed, Out: io.Discard, Progress: io.Discard})
		if err == nil || !strings.Contains(err.Error(), CacheFile) {
			t.Errorf("%s: resumed with err = %v", name, err)
		}
		os.WriteFile(path, b, 0o644)
	}
	// a changed datastore shard: refused, naming the directory
	shards, err := filepath.Glob(filepath.Join(resumed, DatastoreDir, "*v1*"))
	if err != nil || len(shards) == 0 {
		t.Fatalf("no datastore shard (%v)", err)
	}
	tested := false
	for _, f := range shards {
		if strings.Contains(filepath.Base(f), "manifest") {
			continue
		}
		tested = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := append([]byte(nil), b...)
		c[len(c)-1] ^= 1
		os.WriteFile(f, c, 0o644)
		os.Remove(filepath.Join(resumed, experiment.MetricsFile))
		_, err = experiment.Run(context.Background(), rec, experiment.Options{ResumeDir: resumed, Out: io.Discard, Progress: io.Discard})
		if err == nil || !strings.Contains(err.Error(), DatastoreDir) {
			t.Errorf("a changed shard %s: resumed with err = %v", f, err)
		}
		os.WriteFile(f, b, 0o644)
		break
	}
	if !tested {
		t.Errorf("no shard file among %v", shards)
	}
	damage("cut short", func(s string) string { return s[:len(s)-10] })
	damage("edited", func(s string) string {
		i := strings.LastIndex(s, "\t-") + 2 // the first digit of the last score: 1..9 becomes 5, 5 becomes 6
		d := byte('5')
		if s[i] == '5' {
			d = '6'
		}
		return s[:i] + string(d) + s[i+1:]
	})
	other := *Of(rec)
	other.Instruction = "Claim?"
	damage("another layout", func(s string) string {
		return strings.Replace(s, cacheKey(mustSHA(t, Of(rec).LM), Of(rec)), cacheKey(mustSHA(t, Of(rec).LM), &other), 1)
	})
}

func mustSHA(t *testing.T, path string) string {
	t.Helper()
	s, err := bounded.SHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRecipeBounds: every size the section reads is bounded before anything is allocated.
func TestRecipeBounds(t *testing.T) {
	for _, c := range []struct{ key, value string }{
		{"top_k", "1"}, {"top_k", "65"}, {"abstract_tokens", "8"}, {"abstract_tokens", "4096"},
		{"claim_tokens", "300"}, {"tau_r", "0.0"}, {"tau_lm", "-1.0"}, {"train_claims", "-1"}, {"cache_every", "0"},
	} {
		dir := t.TempDir()
		text := fmt.Sprintf("kind = \"replug_lm\"\nname = \"x\"\n[data]\ndir = %q\n[tokenizer]\ntrain = true\n[replug_lm]\nlm = %q\n%s = %s\n",
			testkit.SciFactDir(t), testkit.TinyLlamaGGUF(t, dir, 256), c.key, c.value)
		if _, err := testkit.LoadText(t, filepath.Join(dir, "r.toml"), text); err == nil || !strings.Contains(err.Error(), "replug_lm."+c.key) {
			t.Errorf("%s = %s: err = %v", c.key, c.value, err)
		}
	}
}

// TestDocTable: doc.go documents every key of [replug_lm] with its default.
func TestDocTable(t *testing.T) { testkit.DocTable(t, "replug_lm.", defaultConfig()) }

// TestPartialCache: a cache holding only some claims' scores (an interrupted scoring) is taken
// as it is and the LM scores the rest: the scores equal, bit for bit, those of a run that scored
// every claim, and the rewritten file is the same file.
func TestPartialCache(t *testing.T) {
	r := prepared(t, tinyRecipe(t, ""))
	path := filepath.Join(r.dir, CacheFile)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := r.lmLL
	h := teachercache.Header{TeacherSHA256: cacheKey(r.lmSHA, r.c), MaxLength: r.c.AbstractTokens, Teacher: r.c.LM}
	part := map[teachercache.Pair]float32{}
	for i := range 3 {
		for k, row := range r.cands[i] {
			part[teachercache.Pair{r.claims[i], r.ids[row]}] = want[i][k]
		}
	}
	if err := teachercache.Write(path, h, part); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r.o.Out = &out
	if err := r.score(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "lm: 15 (claim, abstract) pairs scored by the LM, 9 from "+CacheFile) {
		t.Errorf("scoring over a partial cache said:\n%s", out.String())
	}
	for i := range want {
		for k := range want[i] {
			if math.Float32bits(r.lmLL[i][k]) != math.Float32bits(want[i][k]) {
				t.Errorf("claim %d candidate %d: %v, the whole run scored %v", i, k, r.lmLL[i][k], want[i][k])
			}
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(whole) {
		t.Errorf("the completed cache differs from the one scored at once (err %v)", err)
	}

	// replug_lm.lm_cache: another run starts from this run's scores and scores nothing
	other := tinyRecipe(t, "lm_cache = \""+path+"\"\n")
	if Of(other).LMCache != path {
		t.Fatalf("lm_cache = %q", Of(other).LMCache)
	}
	r2 := &lmRun{rec: other, c: Of(other), o: experiment.Options{Out: &out, Progress: io.Discard}, seed: uint64(other.Seed)}
	out.Reset()
	for _, stage := range []func() error{r2.load, r2.open, r2.datastore, r2.candidates, func() error { return r2.score(context.Background()) }} {
		if err := stage(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(out.String(), "lm: 0 (claim, abstract) pairs scored by the LM, 24 from") {
		t.Errorf("a run from lm_cache said:\n%s", out.String())
	}
}
