package pipeline

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/export"
	"github.com/ragtrain/ragtrain/index/shard"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// TestMain parses the flags and initialises the Beam SDK (beam.Init), as a pipeline's main
// must. Prism's and the SDK's logs (slog) are shown with -v only: the failure test's panic
// logs a page of stack.
func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	if !testing.Verbose() {
		slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	dir, err := os.MkdirTemp("", "pipeline-models-")
	if err != nil {
		panic(err)
	}
	modelsDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// modelsDir holds the test models, written once per encoder and seed (writeModelHash).
var (
	modelsDir string
	modelsMu  sync.Mutex
	models    = map[string][2]string{}
)

// cranfield is the test corpus: 1400 passages, two of them empty.
const cranfield = "../datasets/cranfield/corpus.jsonl"

// writeModel exports a randomly initialised shared bi-encoder (seed) over BERT's uncased
// vocabulary into a new directory and returns it: "bow" (H 32) or a one-layer "transformer"
// (H 16, 2 heads).
func writeModel(t *testing.T, encoder string, seed uint64) string {
	dir, _ := writeModelHash(t, encoder, seed)
	return dir
}

// writeModelHash is writeModel that also returns the passage tower's indexrefresh.HashParams.
// Each model is written once and shared by the tests, which only read it.
func writeModelHash(t *testing.T, encoder string, seed uint64) (string, string) {
	t.Helper()
	modelsMu.Lock()
	defer modelsMu.Unlock()
	key := fmt.Sprintf("%s-%d", encoder, seed)
	if m, ok := models[key]; ok {
		return m[0], m[1]
	}
	tok, err := tokenize.Load("../testdata/tokenizers/bert-base-uncased/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.EncoderConfig{Encoder: encoder, Vocab: tok.VocabSize(), Hidden: 32, Pooling: "mean"}
	if encoder == "transformer" {
		cfg.Hidden, cfg.Layers, cfg.Heads, cfg.FFN, cfg.MaxPosition = 16, 1, 2, 32, 64
	}
	m, err := model.NewBiEncoder(cfg, true, seed)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(modelsDir, key)
	if err := export.WriteBiEncoder(dir, m, tok, export.BiEncoderMeta{Similarity: "cosine", MaxLength: 64}); err != nil {
		t.Fatal(err)
	}
	hash, err := indexrefresh.HashParams(m.Passage.Params())
	if err != nil {
		t.Fatal(err)
	}
	models[key] = [2]string{dir, hash}
	return dir, hash
}

// sameBits reports the first row whose vectors differ in any bit, or -1.
func sameBits(a, b []float32, dim int) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i / dim
		}
	}
	return -1
}

// checkAgainstInProcess reads the committed output of cfg and compares it with the corpus
// encoded in this process by one encoder: the same ids in corpus order, the same bits.
func checkAgainstInProcess(t *testing.T, cfg EncodeConfig) Encoding {
	t.Helper()
	ids, vecs, man, err := ReadEmbeddings(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs, want, err := EncodeInProcess(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("%d ids, want the corpus's %d in its order", len(ids), len(wantIDs))
	}
	if len(vecs) != len(want) {
		t.Fatalf("%d values, want %d", len(vecs), len(want))
	}
	if r := sameBits(vecs, want, man.Dim); r >= 0 {
		t.Fatalf("row %d (%s) differs from the in-process encoding: %v vs %v", r, ids[r], vecs[r*man.Dim:r*man.Dim+3], want[r*man.Dim:r*man.Dim+3])
	}
	return man
}

// TestEncodeMatchesInProcess: on Prism, the pipeline encodes Cranfield into 5 shards (4 of 300
// passages, one of 200) whose rows are bit for bit the in-process encoder's, for a bow and a
// transformer tower, with fixed and with dynamic padding; the manifest names the tower's
// parameter hash and the index version, and the encoding file the settings.
func TestEncodeMatchesInProcess(t *testing.T) {
	for _, tc := range []struct {
		encoder string
		dynamic bool
	}{{"bow", false}, {"transformer", false}, {"transformer", true}} {
		t.Run(fmt.Sprintf("%s/dynamic=%v", tc.encoder, tc.dynamic), func(t *testing.T) {
			dir, wantHash := writeModelHash(t, tc.encoder, 1)
			cfg := EncodeConfig{Model: dir, Corpus: cranfield, Out: t.TempDir(), ShardRows: 300, Dynamic: tc.dynamic, TitleField: true, IndexVersion: "test-1"}
			// A temporary directory of this test's own: go test runs packages in parallel, and
			// cmd/pipeline's Beam runs leave their placeholders in the shared one meanwhile.
			t.Setenv("TMPDIR", t.TempDir())
			placeholders := filepath.Join(os.TempDir(), "beamloopbackworker-*")
			before, _ := filepath.Glob(placeholders)
			res, err := Encode(context.Background(), cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			if after, _ := filepath.Glob(placeholders); len(after) > len(before) {
				t.Errorf("the run left %d beamloopbackworker files in %s", len(after)-len(before), os.TempDir())
			}
			e := checkAgainstInProcess(t, cfg)
			man := res.Manifest
			rows := []int64{}
			for _, s := range man.Shards {
				rows = append(rows, s.Count)
			}
			if man.Count != 1400 || !slices.Equal(rows, []int64{300, 300, 300, 300, 200}) || man.ModelHash != wantHash ||
				man.Version != "test-1-"+e.Key() || man.DType != "float32" || e.MaxLength != 64 || e.Similarity != "cosine" ||
				e.Dynamic != tc.dynamic || e.Count != 1400 || man.Dim != e.Dim || e != res.Plan.Encoding {
				t.Fatalf("manifest %+v\nencoding %+v", man, e)
			}
			// What truncation to 64 tokens cut: the in-process encoder's counts.
			pe, err := OpenPassageEncoder(dir, 0, "", tc.dynamic)
			if err != nil {
				t.Fatal(err)
			}
			defer pe.Close()
			corpus, err := data.LoadCorpus(cranfield)
			if err != nil {
				t.Fatal(err)
			}
			passages := make([]string, corpus.Len())
			for i := range passages {
				passages[i] = corpus.Passage(i, true)
			}
			var c tokenize.TruncCount
			if _, err := pe.EncodeCounting(passages, &c); err != nil {
				t.Fatal(err)
			}
			texts, cut, tokens, dropped := c.Counts()
			if got := res.Truncation; texts != 1400 || cut < 100 || got.Cut != int64(cut) || got.Tokens != int64(tokens) || got.TokensDropped != int64(dropped) {
				t.Fatalf("truncation %+v, in process %d of %d cut, %d tokens, %d dropped (want over 100 cut)", got, cut, texts, tokens, dropped)
			}
			if res.Encoded != 1400 || res.Reused != 0 || res.Plan.Empty != 2 {
				t.Fatalf("encoded %d passages, reused %d shards, %d empty; want 1400, 0, 2", res.Encoded, res.Reused, res.Plan.Empty)
			}
		})
	}
}

// treeBytes returns every file under dir (relative path -> bytes).
func treeBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameTree(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs from the uninterrupted run's (%d vs %d bytes)", name, len(got[name]), len(b))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: not in the uninterrupted run's output", name)
		}
	}
}

// TestEncodeKilledAndRestarted: a worker that panics on shard 2 the first time fails the job
// before anything is committed (no manifest); the job run again encodes what is missing and
// commits an output identical, file for file and byte for byte, to an uninterrupted run's, and
// a third run reuses every shard and changes nothing.
func TestEncodeKilledAndRestarted(t *testing.T) {
	dir := writeModel(t, "bow", 1)
	cfg := EncodeConfig{Model: dir, Corpus: cranfield, ShardRows: 300, TitleField: true}
	clean := cfg
	clean.Out = t.TempDir()
	if _, err := Encode(context.Background(), clean, ""); err != nil {
		t.Fatal(err)
	}
	want := treeBytes(t, clean.Out)

	cfg.Out = t.TempDir()
	var fired atomic.Bool
	shardHook = func(k int) {
		if k == 2 && fired.CompareAndSwap(false, true) {
			panic("killed on shard 2")
		}
	}
	defer func() { shardHook = nil }()
	_, err := Encode(context.Background(), cfg, "")
	if err == nil || !strings.Contains(err.Error(), "killed on shard 2") {
		t.Fatalf("first run: error %v, want the panic on shard 2", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Out, shard.ManifestFile)); !os.IsNotExist(err) {
		t.Fatalf("a failed run left a manifest (stat: %v)", err)
	}
	res, err := Encode(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Encoded < 200 || res.Encoded+300*res.Reused != 1400 {
		t.Fatalf("second run encoded %d passages and reused %d shards: want the missing shards only (1400 in all)", res.Encoded, res.Reused)
	}
	sameTree(t, treeBytes(t, cfg.Out), want)
	checkAgainstInProcess(t, cfg)
	res, err = Encode(context.Background(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Encoded != 0 || res.Reused != 5 {
		t.Fatalf("third run encoded %d passages and reused %d shards, want 0 and 5", res.Encoded, res.Reused)
	}
	sameTree(t, treeBytes(t, cfg.Out), want)
}

// versions returns the versions of the shard files in dir, sorted.
func versions(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "emb-*.shard"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, n := range names {
		v := strings.TrimPrefix(filepath.Base(n), "emb-")
		v = v[:len(v)-len("-00000.shard")]
		if !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

// TestEncodeNewModelSameOut: encoding with another model into the same directory commits the
// new version whole: every row read through the manifest is the new model's, the old version's
// files are left beside it (named by their version), and a damaged shard of the new version
// left by an earlier attempt, with a record that no longer matches it, is encoded again.
func TestEncodeNewModelSameOut(t *testing.T) {
	out := t.TempDir()
	first := EncodeConfig{Model: writeModel(t, "bow", 1), Corpus: cranfield, Out: out, ShardRows: 500, TitleField: true}
	r1, err := Encode(context.Background(), first, "")
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.Model = writeModel(t, "bow", 2)
	plan, err := Plan(second)
	if err != nil {
		t.Fatal(err)
	}
	// Shard 1 of the new version as a crash could not leave it but a disk could: damaged, with
	// a record of the bytes it should hold.
	v2 := plan.Encoding.Version()
	if err := os.WriteFile(filepath.Join(out, shard.ShardFile(v2, 1)), []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := openStore(out).(dirStore)
	if err := os.MkdirAll(filepath.Dir(store.doneFile(plan.Encoding, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"entry":{"file":%q,"count":500,"bytes":7,"sha256":"00"},"truncation":{}}`, shard.ShardFile(v2, 1))
	if err := os.WriteFile(store.doneFile(plan.Encoding, 1), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	r2, err := Encode(context.Background(), second, "")
	if err != nil {
		t.Fatal(err)
	}
	if r2.Encoded != 1400 || r2.Reused != 0 {
		t.Fatalf("encoded %d passages, reused %d shards; want 1400 and 0", r2.Encoded, r2.Reused)
	}
	if r1.Manifest.ModelHash == r2.Manifest.ModelHash || r1.Manifest.Version == r2.Manifest.Version || r2.Manifest.Version != v2 {
		t.Fatalf("two models, one hash %s / version %s", r2.Manifest.ModelHash, r2.Manifest.Version)
	}
	checkAgainstInProcess(t, second)
	want := []string{r1.Manifest.Version, v2}
	slices.Sort(want)
	if got := versions(t, out); !slices.Equal(got, want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
}

// TestPlanErrors: a duplicate id and a malformed line stop the job before any worker starts,
// naming the corpus file and line.
func TestPlanErrors(t *testing.T) {
	dir := writeModel(t, "bow", 1)
	corpus := filepath.Join(t.TempDir(), "corpus.jsonl")
	for body, want := range map[string]string{
		"{\"_id\":\"a\",\"text\":\"x\"}\n{\"_id\":\"b\",\"text\":\"y\"}\n{\"_id\":\"a\",\"text\":\"z\"}\n": corpus + `:3: duplicate _id "a" (first at line 1)`,
		"{\"_id\":\"a\",\"text\":\"x\"}\n{\"_id\":\"b\",\"text\":7}\n":                                     corpus + `:2: field "text": want a string, got a number`,
		"\n\n": corpus + `: no documents`,
	} {
		if err := os.WriteFile(corpus, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Plan(EncodeConfig{Model: dir, Corpus: corpus, Out: t.TempDir()})
		if err == nil || err.Error() != want {
			t.Errorf("error %v, want %s", err, want)
		}
	}
}

// TestEncodeDuplicateWorkers: every shard task given twice (as a runner that retries or
// speculatively runs a bundle twice does) commits the output of a single run, byte for byte;
// a commit that receives one shard with two different contents refuses it.
func TestEncodeDuplicateWorkers(t *testing.T) {
	cfg := EncodeConfig{Model: writeModel(t, "bow", 1), Corpus: cranfield, Out: t.TempDir(), ShardRows: 400, TitleField: true}
	if _, err := Encode(context.Background(), cfg, ""); err != nil {
		t.Fatal(err)
	}
	want := treeBytes(t, cfg.Out)

	cfg.Out = t.TempDir()
	plan, err := Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan.Tasks = append(plan.Tasks, plan.Tasks...)
	p, s := beam.NewPipelineWithRoot()
	EncodeCorpus(s, plan)
	if _, err := run(context.Background(), "prism", p); err != nil {
		t.Fatal(err)
	}
	sameTree(t, treeBytes(t, cfg.Out), want)

	e := plan.Encoding
	fn := &commitFn{Encoding: e, Out: cfg.Out}
	a := shardDone{Index: 0, File: shard.ShardFile(e.Version(), 0), Count: 400, Bytes: 10, SHA256: "aa"}
	b := a
	b.SHA256 = "bb"
	reports := []shardDone{a, b}
	err = fn.ProcessElement(context.Background(), 0, func(d *shardDone) bool {
		if len(reports) == 0 {
			return false
		}
		*d, reports = reports[0], reports[1:]
		return true
	})
	if err == nil || !strings.Contains(err.Error(), "shard 0 reported twice with different contents") {
		t.Fatalf("commit of two contents for shard 0: error %v", err)
	}
}
