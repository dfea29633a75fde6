package bench

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ragtrain/ragtrain/model"
)

// TestMain lets the test binary serve as our worker process, as cmd/bench does
// (Options.Self = the test binary): "-worker NAME -dir DIR [-precision P]".
func TestMain(m *testing.M) {
	if (len(os.Args) == 5 || len(os.Args) == 7 && os.Args[5] == "-precision") && os.Args[1] == "-worker" && os.Args[3] == "-dir" {
		if len(os.Args) == 7 {
			p, err := model.ParsePrecision(os.Args[6])
			if err != nil {
				os.Exit(2)
			}
			model.SetMatmulPrecision(p)
		}
		if err := Serve(os.Args[2], os.Args[4], os.Stdin, os.Stdout, Profiles{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var (
	prepOnce  sync.Once
	prepDir   string
	prepData  *Data
	prepFiles Files
	prepErr   error
)

// prepared runs Prepare on the repository's Cranfield copy once for all tests.
func prepared(t *testing.T) (*Data, Files) {
	t.Helper()
	prepOnce.Do(func() {
		prepDir, prepErr = os.MkdirTemp("", "bench-test-")
		if prepErr == nil {
			prepData, prepFiles, prepErr = Prepare("../datasets/cranfield", prepDir, DefaultShapes(), 42)
		}
	})
	if prepErr != nil {
		t.Fatal(prepErr)
	}
	return prepData, prepFiles
}

func TestMedianSpread(t *testing.T) {
	cases := []struct {
		v              []float64
		median, spread float64
	}{
		{[]float64{3}, 3, 0},
		// quartiles by nearest rank: 0.25·3 -> s[1] = 2, 0.75·3 -> s[2] = 3; (3-2)/2.5 = 40%
		{[]float64{4, 1, 3, 2}, 2.5, 40},
		// 0.25·6 -> s[2] = 3, 0.75·6 -> s[5] = 6; (6-3)/4 = 75%
		{[]float64{10, 1, 2, 3, 4, 5, 6}, 4, 75},
	}
	for _, c := range cases {
		if got := median(c.v); got != c.median {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.median)
		}
		if got := spread(c.v); got != c.spread {
			t.Errorf("spread(%v) = %v, want %v", c.v, got, c.spread)
		}
	}
}

// TestGEMMFLOPs checks the FLOP count of the retriever's Transformer step by hand: per layer
// over T = 96·64 = 6144 tokens, 8·T·H² (Q, K, V, output) + 4·T·H·F (feed-forward) +
// 4·96·64²·H (scores and context) = 805306368 + 1610612736 + 201326592; two layers, plus the
// 32 x 64 score matrix 2·32·64·128 = 524288; forward and backward = 3 x forward.
func TestGEMMFLOPs(t *testing.T) {
	w, _ := Find("bi-transformer-step")
	want := 3 * (2*(805306368+1610612736+201326592) + 524288.0)
	if got := w.GEMMFLOPs(DefaultShapes()); got != want || want != 15705047040 {
		t.Fatalf("GEMM FLOPs = %.0f, want %.0f", got, want)
	}
	enc, _ := Find("encode-transformer")
	if got := enc.GEMMFLOPs(DefaultShapes()); got != 512.0/96*(want/3-524288) {
		t.Fatalf("encoding FLOPs = %.0f, want 512/96 of the step's forward encoder work", got)
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tbench\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	if got := parseVmHWM(status); got != 123456 {
		t.Fatalf("VmHWM = %d, want 123456", got)
	}
	if got := parseVmHWM("Name:\tx\n"); got != 0 {
		t.Fatalf("no VmHWM line: %d, want 0", got)
	}
	if PeakRSSKiB() <= 0 {
		t.Fatal("PeakRSSKiB of this process is not positive")
	}
}

// TestDigest recomputes the digest of two queries from its definition.
func TestDigest(t *testing.T) {
	scores := [][]float32{{2.5, 1}, nil}
	text := fmt.Sprintf("q1 2 %x %x\nq2 0\n", math.Float32bits(2.5), math.Float32bits(1))
	want := fmt.Sprintf("%x", sha256.Sum256([]byte(text)))[:16]
	if got := Digest([]string{"q1", "q2"}, scores); got != want {
		t.Fatalf("Digest = %s, want %s (of %q)", got, want, text)
	}
	if Digest([]string{"q1", "q2"}, [][]float32{{2.5, 1.5}, nil}) == want {
		t.Fatal("a different score gave the same digest")
	}
}

func TestFinish(t *testing.T) {
	r := Result{GFLOP: 10, Samples: []Sample{
		{Label: "ours", Seconds: []float64{0.5, 0.4, 0.6}, Units: 32},
		{Label: "peer", Peer: true, Seconds: []float64{1, 1, 1.2}, Units: 32},
	}}
	finish(&r)
	ours, peer := r.Samples[0], r.Samples[1]
	if ours.Median != 0.5 || ours.PerSecond != 64 || ours.GFLOPS != 20 || ours.Ratio != 2 {
		t.Fatalf("ours: %+v, want median 0.5 s, 64/s, 20 GFLOP/s, ratio 2", ours)
	}
	if peer.PerSecond != 32 || peer.Ratio != 0 {
		t.Fatalf("peer: %+v", peer)
	}
}

// TestPrepare checks the shapes of the shared inputs and the candidate masks.
func TestPrepare(t *testing.T) {
	d, f := prepared(t)
	s := d.Shapes
	if len(d.Bi) != s.BiBatches {
		t.Fatalf("%d retriever batches, want %d", len(d.Bi), s.BiBatches)
	}
	for i, b := range d.Bi {
		if b.Q.N != s.BiB || b.P.N != 2*s.BiB || len(b.Q.IDs) != s.BiB*s.L || len(b.P.Mask) != 2*s.BiB*s.L || len(b.Keep) != s.BiB*2*s.BiB {
			t.Fatalf("batch %d: %d queries, %d passages, %d ids, %d keep", i, b.Q.N, b.P.N, len(b.Q.IDs), len(b.Keep))
		}
		for q := range s.BiB {
			if b.Keep[q*2*s.BiB+q] != 1 {
				t.Fatalf("batch %d: query %d's own positive is masked", i, q)
			}
		}
		for _, id := range b.Q.IDs {
			if id < 0 || id >= s.Vocab {
				t.Fatalf("batch %d: id %d outside [0, %d)", i, id, s.Vocab)
			}
		}
	}
	if d.Encode.N != s.EncodeN || d.Score.N != s.ScoreN || len(d.Score.Types) != s.ScoreN*s.CrossL {
		t.Fatalf("encode %d passages, score %d pairs with %d types", d.Encode.N, d.Score.N, len(d.Score.Types))
	}
	for _, id := range d.Reader.IDs {
		if id >= s.ReaderVocab {
			t.Fatalf("reader id %d >= %d", id, s.ReaderVocab)
		}
	}
	ids, texts, err := readTSV(f.Corpus)
	if err != nil || len(ids) != 1400 || len(texts) != 1400 || strings.ContainsAny(strings.Join(texts, ""), "\t\n") {
		t.Fatalf("corpus.tsv: %d ids, %d texts, %v", len(ids), len(texts), err)
	}
	qids, _, err := readTSV(f.Queries)
	if err != nil || len(qids) != 225 {
		t.Fatalf("queries.tsv: %d queries, %v", len(qids), err)
	}
}

// serve runs Serve on the given commands and returns its messages.
func serve(t *testing.T, name, dir, commands string) ([]message, error) {
	t.Helper()
	var out bytes.Buffer
	err := Serve(name, dir, strings.NewReader(commands), &out, Profiles{})
	var msgs []message
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m message
		if jerr := json.Unmarshal(sc.Bytes(), &m); jerr != nil {
			t.Fatalf("%s: line %q is not a message: %v", name, sc.Text(), jerr)
		}
		msgs = append(msgs, m)
	}
	return msgs, err
}

// TestServe runs our worker in process: the protocol's messages, the units of each workload,
// losses that stay finite and BM25 rankings that stay the same from run to run.
func TestServe(t *testing.T) {
	_, f := prepared(t)
	dir := filepath.Dir(f.Data)
	for _, c := range []struct {
		name  string
		units int
	}{{"bm25-index", 1400}, {"bm25-query", 225}, {"bi-bow-step", 32}, {"encode-bow", 512}} {
		msgs, err := serve(t, c.name, dir, "run\nrun\nquit\n")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(msgs) != 4 || !msgs[0].Ready || !strings.HasPrefix(msgs[0].System, "ragtrain (") || msgs[3].PeakRSSKiB <= 0 {
			t.Fatalf("%s: messages %+v", c.name, msgs)
		}
		for _, m := range msgs[1:3] {
			if m.Units != c.units || !(m.Seconds > 0) || math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0) {
				t.Fatalf("%s: run %+v, want %d units, a positive time and a finite loss", c.name, m, c.units)
			}
		}
		if c.name == "bm25-query" && (msgs[1].Digest == "" || msgs[1].Digest != msgs[2].Digest) {
			t.Fatalf("bm25-query digests %q and %q", msgs[1].Digest, msgs[2].Digest)
		}
	}
	msgs, err := serve(t, "no-such-workload", dir, "run\n")
	if err == nil || len(msgs) != 1 || !strings.Contains(msgs[0].Error, `unknown workload "no-such-workload"`) {
		t.Fatalf("unknown workload: %v, %+v", err, msgs)
	}
	msgs, err = serve(t, "bm25-index", dir, "jump\n")
	if err == nil || len(msgs) != 2 || !strings.Contains(msgs[1].Error, `unknown command "jump"`) {
		t.Fatalf("unknown command: %v, %+v", err, msgs)
	}
}

// TestRun runs the orchestrator with the test binary as our worker and peers that are missing:
// it must say what is missing, run ours and print the table.
func TestRun(t *testing.T) {
	var out, log bytes.Buffer
	work := t.TempDir()
	res, err := Run(Options{
		Dataset: "../datasets/cranfield", Workloads: []string{"bm25-query", "bi-bow-step"}, Reps: 2, Warmup: 0, Threads: 2,
		Python: filepath.Join(work, "no-python"), JavaLibs: work, Peers: true, Self: os.Args[0], WorkDir: work,
		Command: "go test", Out: &out, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PyTorch (Debian): not run: no Python with torch (tried " + filepath.Join(work, "no-python") + ")",
		"PyTorch 2 (venv): not run: no venv given",
		"Lucene: not run: no lucene-core-4.10*.jar and lucene-analyzers-common-4.10*.jar in " + work + " (install Debian liblucene4.10-java)"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if len(res) != 2 || len(res[0].Samples) != 1 || len(res[0].Samples[0].Seconds) != 2 || res[0].Samples[0].Units != 225 || res[0].Samples[0].PeakRSS <= 0 {
		t.Fatalf("results %+v", res)
	}
	table := out.String()
	for _, want := range []string{"| BM25 querying, 225 queries, top 1000 | ours, ", "queries/s", "| retriever training step, bow (0.011 GFLOP) | ours, ",
		"BM25 rankings: not compared (a side did not run)", "- BM25 querying, 225 queries, top 1000 >= 1.0x lucene: not measured"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if _, err := Run(Options{Dataset: "../datasets/cranfield", Workloads: []string{"bm26"}, Reps: 1, Threads: 1, WorkDir: work, Out: &out, Log: &log}); err == nil || !strings.Contains(err.Error(), `unknown workload "bm26"`) {
		t.Fatalf("unknown workload: %v", err)
	}
}

// TestRunBF16: with BF16 the orchestrator also runs our worker with bfloat16 products, labelled
// "..., bf16", and that worker says it runs them (the flag reaches it).
func TestRunBF16(t *testing.T) {
	var out, log bytes.Buffer
	work := t.TempDir()
	res, err := Run(Options{
		Dataset: "../datasets/cranfield", Workloads: []string{"bi-transformer-step"}, Reps: 1, Warmup: 0, Threads: 2,
		BF16: true, Self: os.Args[0], WorkDir: work, Command: "go test", Settle: -1, Out: &out, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Samples) != 2 {
		t.Fatalf("results %+v", res)
	}
	f32, bf := res[0].Samples[0], res[0].Samples[1]
	if strings.Contains(f32.Label, "bf16") || !strings.HasSuffix(bf.Label, ", bf16") || f32.Err != "" || bf.Err != "" {
		t.Fatalf("samples %+v, %+v", f32, bf)
	}
	if strings.Contains(f32.System, "bf16") || !strings.Contains(bf.System, "bf16 products: ") {
		t.Fatalf("workers say %q and %q", f32.System, bf.System)
	}
	if !strings.Contains(out.String(), "| ours, "+shortBLAS(model.BLAS())+", bf16 |") {
		t.Errorf("table lacks the bf16 row:\n%s", out.String())
	}
}

// TestPeerAutocast: peer.py --autocast runs a step under torch.autocast bf16 and says so
// (skipped without a Python that imports torch).
func TestPeerAutocast(t *testing.T) {
	pys := testPythons(t)
	if len(pys) == 0 {
		t.Skip("PyTorch peer not checked: no Python with torch (install Debian python3-torch, or bash tools/pyenv/setup.sh)")
	}
	_, f := prepared(t)
	script := filepath.Join(t.TempDir(), "peer.py")
	if err := os.WriteFile(script, peerPy, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pys[len(pys)-1], script, "--workload", "encode-transformer", "--data", f.Data, "--threads", "1", "--autocast")
	cmd.Stdin = strings.NewReader("run\nquit\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var msgs []message
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m message
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			continue // the peer's own warnings
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 || !msgs[0].Ready || !strings.HasSuffix(msgs[0].System, ", bf16 autocast") || msgs[1].Units != 512 || !(msgs[1].Seconds > 0) {
		t.Fatalf("messages %+v", msgs)
	}
}

// TestPyTorchSameModels checks that the PyTorch script builds models of exactly our parameter
// tensors and counts (skipped without a Python that imports torch).
func TestPyTorchSameModels(t *testing.T) {
	pys := testPythons(t)
	if len(pys) == 0 {
		t.Skip("PyTorch peers not checked: no Python with torch (install Debian python3-torch, or bash tools/pyenv/setup.sh)")
	}
	for _, py := range pys {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(py)))+"-"+filepath.Base(py), func(t *testing.T) { pyTorchSameModels(t, py) })
	}
}

// testPythons are the interpreters with torch the tests check the peer with: Debian's and the
// repository's venv ($VENV, else ../.venv).
func testPythons(t *testing.T) []string {
	var pys []string
	if py, _, _, err := findTorch(""); err == nil {
		pys = append(pys, py)
	}
	venv := os.Getenv("VENV")
	if venv == "" {
		venv = "../.venv"
	}
	if py, _, _, err := findTorch(filepath.Join(venv, "bin", "python")); err == nil {
		pys = append(pys, py)
	}
	return pys
}

func pyTorchSameModels(t *testing.T, py string) {
	d, f := prepared(t)
	s := d.Shapes
	script := filepath.Join(t.TempDir(), "peer.py")
	if err := os.WriteFile(script, peerPy, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, "--workload", "all", "--data", f.Data, "--describe").Output()
	if err != nil {
		t.Fatal(err)
	}
	type size struct{ Tensors, Params int }
	torch := map[string]size{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			Workload string
			size
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		torch[m.Workload] = m.size
	}
	cross := s.transformer(s.Vocab, s.CrossL)
	cross.Pooling = model.PoolingCLS
	bi := func(cfg model.EncoderConfig) []*model.Param {
		m, err := model.NewBiEncoder(cfg, true, 1)
		if err != nil {
			t.Fatal(err)
		}
		return m.Params()
	}
	ce, err := model.NewCrossEncoder(cross, 1)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := model.NewReader(s.transformer(s.ReaderVocab, s.ReaderL), 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range map[string][]*model.Param{
		"bi-transformer-step": bi(s.transformer(s.Vocab, s.L)), "encode-transformer": bi(s.transformer(s.Vocab, s.L)),
		"bi-bow-step": bi(s.bow()), "encode-bow": bi(s.bow()),
		"cross-step": ce.Params(), "cross-score": ce.Params(), "reader-step": rd.Params(),
	} {
		n := 0
		for _, p := range ps {
			n += p.Value.Size()
		}
		if got := torch[name]; got.Tensors != len(ps) || got.Params != n {
			t.Errorf("%s: PyTorch has %d tensors, %d parameters; ours %d, %d", name, got.Tensors, got.Params, len(ps), n)
		}
	}
}
