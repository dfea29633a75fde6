package bench

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/model"
)

//go:embed pytorch/smollm2_peer.py
var smolPeerPy []byte

//go:embed pytorch/peer.py
var peerPy []byte

//go:embed lucene/LuceneBench.java
var luceneJava []byte

// Options configure a benchmark run.
type Options struct {
	Dataset   string   // BEIR directory of Cranfield
	Workloads []string // names (Workloads); empty: all
	Reps      int      // timed runs per system, median reported
	Warmup    int      // untimed runs per system first (Lucene gets at least 5, for its JIT)
	Threads   int      // GOMAXPROCS, OPENBLAS_NUM_THREADS, torch.set_num_threads, JVM processors
	// SciFact is the BEIR directory of SciFact (the pretrained-shape workloads), Pretrained the
	// model directory whose tokenizer makes their token ids (absent: one trained on the corpus,
	// see sciFactTokenizer) and SciFactShapes their sizes (zero: DefaultSciFactShapes).
	SciFact       string
	Pretrained    string
	SciFactShapes SciFactShapes
	// SmolLM2 is the SmolLM2-135M-Instruct GGUF of the SmolLM2 workloads (their token ids are
	// SciFact's abstracts, encoded by its tokenizer) and SmolLM2Shapes their sizes (zero:
	// DefaultSmolLM2Shapes). LlamaCppPath is a PYTHONPATH under which the venv's Python imports
	// llama_cpp (llama-cpp-python, e.g. pip install --target DIR), the generation workloads'
	// second peer; "": the venv's own, if it has it.
	SmolLM2       string
	SmolLM2Shapes SmolLM2Shapes
	LlamaCppPath  string
	// Venv is the interpreter of the repository's virtual environment (tools/pyenv/setup.sh:
	// PyTorch 2, sentence-transformers), the first peer and the one ratios are taken against;
	// "": none. Python is Debian's (PyTorch 1.13, python3-torch), a second peer; "":
	// /usr/bin/python3, then python3 on PATH. Compile also runs PyTorch 2 with torch.compile on
	// the workloads that ask for it.
	Venv     string
	Python   string
	Compile  bool
	JavaLibs string // directory of Debian's Lucene jars; "": /usr/share/java
	OpenBLAS bool   // also build and run our OpenBLAS variant (or the pure-Go one from an OpenBLAS build)
	// BF16 also runs ours with bfloat16 products (model.BFloat16; label "ours, ..., bf16") and
	// the PyTorch 2 peers under torch.autocast("cpu", dtype=torch.bfloat16) (labels "... eager,
	// bf16 autocast", "... encode(), bf16 autocast").
	BF16    bool
	Peers   bool   // run PyTorch and Lucene
	Self    string // our worker binary (this program)
	WorkDir string // scratch directory (data, compiled peers, profiles)
	Profile bool   // write CPU and allocation profiles of our workers into WorkDir
	JSON    string // also write the results there ("" for none)
	Command string // the command line, printed in the header
	Timeout time.Duration
	// FMAPeak is how long each FMA peak measurement runs (model.FMAPeak: every vector width
	// on one thread and on Threads), before the timed runs of minilm-train, whose matrix
	// products are judged against it; 0: not measured.
	FMAPeak time.Duration
	// Settle is the longest wait after the timed runs for the 1-minute load average to fall to
	// NoisyLoad (LoadSettled): on a 2-core machine the bench's own threads keep the average near
	// Threads while it measures, so the end value read at once measures the bench itself.
	// 0: DefaultSettle; negative: read at once.
	Settle   time.Duration
	Out, Log io.Writer // the table; progress and skip notices
}

// DefaultSettle is Options.Settle's default: the 1-minute load average decays by e^(-t/60), so
// from 2 (the bench's two threads) to 1.5 takes about 17 s with nothing else running and about
// 60 s with 1.2 threads of other work; 120 s leaves the verdict to what other processes do.
const DefaultSettle = 120 * time.Second

// FMAPeak is one measurement of the machine's float32 FMA peak (model.FMAPeak).
type FMAPeak struct {
	Width   int     `json:"width_bits"`
	Threads int     `json:"threads"`
	GFLOPS  float64 `json:"gflops"`
}

// measurePeaks measures the FMA peak of every vector width on one thread and on o.Threads.
func (o Options) measurePeaks(logf func(string, ...any)) []FMAPeak {
	var peaks []FMAPeak
	for _, w := range model.FMAWidths() {
		for _, th := range slices.Compact([]int{1, o.Threads}) {
			g, err := model.FMAPeak(w, th, o.FMAPeak)
			if err != nil {
				logf("FMA peak: %v", err)
				continue
			}
			peaks = append(peaks, FMAPeak{Width: w, Threads: th, GFLOPS: g})
		}
	}
	return peaks
}

// system is one side of a comparison: how to start its worker for a workload.
type system struct {
	label string // column label, e.g. "ours, Go kernel"
	peer  string // "" for ours, else PeerPyTorch or PeerLucene
	start func(w Workload) *exec.Cmd
	only  func(w Workload) bool // nil: every workload of its peer
}

// Sample is the outcome of one system on one workload.
type Sample struct {
	System    string    `json:"system"`
	Label     string    `json:"label"`
	Peer      bool      `json:"peer"`
	Seconds   []float64 `json:"seconds"`
	CPU       []float64 `json:"cpu_seconds"`
	Median    float64   `json:"median_seconds"`
	MedianCPU float64   `json:"median_cpu_seconds"`
	Units     int       `json:"units"`
	PerSecond float64   `json:"throughput"`
	Ratio     float64   `json:"ratio_vs_peer,omitempty"` // our throughput / the peer's
	GFLOPS    float64   `json:"gflops,omitempty"`
	// GEMMGFLOPS is the median over runs of the matrix products' own rate, the flops our
	// worker counted in them over the time it spent in them (model.CountGEMM; not attention's
	// per-block products); 0 for peers.
	GEMMGFLOPS float64   `json:"gemm_gflops,omitempty"`
	gemmRates  []float64 // per run
	PeakRSS    int64     `json:"peak_rss_kib"`
	Digest     string    `json:"digest,omitempty"`
	Err        string    `json:"error,omitempty"`
}

// Result is one workload's samples.
type Result struct {
	Workload Workload `json:"-"`
	Name     string   `json:"workload"`
	GFLOP    float64  `json:"gemm_gflop_per_run,omitempty"`
	Samples  []Sample `json:"samples"`
	Note     string   `json:"note,omitempty"`
	Size     string   `json:"size,omitempty"` // the sizes used, in words (pretrained-shape workloads)
	// LoadStart is the 1-minute load average before the bench does anything, LoadEnd right after
	// its last timed run, LoadMax the highest value sampled every 10 s in between, and
	// LoadSettled the value after the bench's own threads stopped (Options.Settle): the load of
	// other processes, which is what makes timings noisy (Loads.Noisy).
	LoadStart   float64 `json:"load_start"`
	LoadEnd     float64 `json:"load_end"`
	LoadMax     float64 `json:"load_max"`
	LoadSettled float64 `json:"load_settled"`
	SettleS     float64 `json:"settle_s"`
	// FMAPeaks, for minilm-train, is the FMA peak measured before its runs (Options.FMAPeak).
	FMAPeaks []FMAPeak `json:"fma_peaks,omitempty"`
}

// Run prepares the inputs, starts the systems' workers workload by workload, alternates their
// timed runs and prints the table.
func Run(o Options) ([]Result, error) {
	if o.Reps < 1 || o.Threads < 1 {
		return nil, fmt.Errorf("bench: reps = %d and threads = %d must be >= 1", o.Reps, o.Threads)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	loads := startLoads(10 * time.Second)
	var wls []Workload
	if len(o.Workloads) == 0 {
		for _, w := range Workloads() {
			if !w.SmolLM2 { // real weights, minutes per run: only when named
				wls = append(wls, w)
			}
		}
	}
	for _, n := range o.Workloads {
		w, ok := Find(n)
		if !ok {
			return nil, fmt.Errorf("bench: unknown workload %q (known: %s)", n, strings.Join(workloadNames(), ", "))
		}
		wls = append(wls, w)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(o.Log, format+"\n", a...) }

	var d *Data
	var sci *SciFactData
	var files Files
	var err error
	if slices.ContainsFunc(wls, func(w Workload) bool { return !w.SciFact && !w.SmolLM2 }) {
		logf("preparing inputs from %s in %s", o.Dataset, o.WorkDir)
		if d, files, err = Prepare(o.Dataset, o.WorkDir, DefaultShapes(), 42); err != nil {
			return nil, err
		}
	}
	if slices.ContainsFunc(wls, func(w Workload) bool { return w.SciFact }) {
		ss := o.SciFactShapes
		if ss == (SciFactShapes{}) {
			ss = DefaultSciFactShapes()
		}
		logf("preparing the pretrained-shape inputs from %s in %s", o.SciFact, o.WorkDir)
		if sci, files.SciFact, err = PrepareSciFact(o.SciFact, o.Pretrained, o.WorkDir, ss, 42); err != nil {
			return nil, err
		}
		logf("token ids: %s", sci.Tokenizer)
	}
	var smol *SmolLM2Data
	if slices.ContainsFunc(wls, func(w Workload) bool { return w.SmolLM2 }) {
		ss := o.SmolLM2Shapes
		if ss.TrainB == 0 {
			ss = DefaultSmolLM2Shapes()
		}
		logf("preparing the SmolLM2 inputs from %s and %s in %s", o.SciFact, o.SmolLM2, o.WorkDir)
		if smol, files.SmolLM2, err = PrepareSmolLM2(o.SciFact, o.SmolLM2, o.WorkDir, ss); err != nil {
			return nil, err
		}
	}
	systems, notes := o.systems(files, logf)
	for _, n := range notes {
		logf("%s", n)
	}

	var results []Result
	for _, w := range wls {
		res := Result{Workload: w, Name: w.Name}
		switch {
		case w.GEMMFLOPs != nil:
			res.GFLOP = w.GEMMFLOPs(d.Shapes) / 1e9
		case w.SciFactFLOPs != nil:
			res.GFLOP = w.SciFactFLOPs(sci) / 1e9
		}
		if w.SciFact {
			res.Size = sci.size(w)
		}
		if w.SmolLM2 {
			res.Size = smol.size(w)
		}
		var use []system
		for _, s := range systems {
			if (s.peer == "" || s.peer == w.Peer) && (s.only == nil || s.only(w)) {
				use = append(use, s)
			}
		}
		if !slices.ContainsFunc(use, func(s system) bool { return s.peer != "" }) {
			res.Note = w.Peer + " not run (see above)"
		}
		if w.Name == "minilm-train" && o.FMAPeak > 0 {
			logf("measuring the FMA peak (%v per width and thread count)", o.FMAPeak)
			res.FMAPeaks = o.measurePeaks(logf)
		}
		logf("%s: %d systems, %d warm-up + %d timed runs each, alternating", w.Name, len(use), o.warmup(w), o.Reps)
		res.Samples = o.measure(w, use, logf)
		finish(&res)
		results = append(results, res)
	}
	ld := loads.stop(o.Settle, o.Threads, logf)
	for i := range results {
		results[i].LoadStart, results[i].LoadEnd, results[i].LoadMax, results[i].LoadSettled, results[i].SettleS =
			ld.Start, ld.End, ld.Max, ld.Settled, ld.SettleS
	}

	o.printTable(results, ld)
	if err := writeJSON(o.JSON, results); err != nil {
		return results, err
	}
	return results, nil
}

func workloadNames() []string {
	var n []string
	for _, w := range Workloads() {
		n = append(n, w.Name)
	}
	return n
}

func (o Options) warmup(w Workload) int {
	if w.Peer == PeerLucene && o.Peers {
		return max(o.Warmup, 5)
	}
	return o.Warmup
}

// measure starts every system's worker, runs warm-up rounds, then o.Reps rounds in which each
// system runs once, the order rotating from round to round so that none always runs first after
// an idle pause; then it quits the workers and reads their peak memory. A system that fails is
// reported with its error; the others go on.
func (o Options) measure(w Workload, systems []system, logf func(string, ...any)) []Sample {
	samples := make([]Sample, len(systems))
	workers := make([]*worker, len(systems))
	for i, s := range systems {
		samples[i] = Sample{Label: s.label, Peer: s.peer != ""}
		wk, err := startWorker(s.label, s.start(w), o.Timeout)
		if err != nil {
			samples[i].Err = err.Error()
			logf("  %s: %v", s.label, err)
			continue
		}
		workers[i] = wk
		samples[i].System = wk.system
	}
	for round := -o.warmup(w); round < o.Reps; round++ {
		for k := range systems {
			i := (k + max(round, 0)) % len(systems)
			wk := workers[i]
			if wk == nil {
				continue
			}
			m, err := wk.send("run", o.Timeout)
			if err != nil {
				samples[i].Err = err.Error()
				logf("  %s: %v", systems[i].label, err)
				wk.kill()
				workers[i] = nil
				continue
			}
			if round >= 0 {
				samples[i].Seconds = append(samples[i].Seconds, m.Seconds)
				samples[i].CPU = append(samples[i].CPU, m.CPUSeconds)
				samples[i].Units = m.Units
				samples[i].Digest = m.Digest
				if m.GEMMSeconds > 0 {
					samples[i].gemmRates = append(samples[i].gemmRates, m.GEMMFLOPs/m.GEMMSeconds/1e9)
				}
			}
		}
	}
	for i, wk := range workers {
		if wk == nil {
			continue
		}
		rss, err := wk.quit(o.Timeout)
		if err != nil {
			samples[i].Err = err.Error()
			continue
		}
		samples[i].PeakRSS = rss
	}
	return samples
}

// finish fills medians, throughputs, ratios and GFLOP/s.
func finish(r *Result) {
	var peer *Sample
	for i := range r.Samples {
		s := &r.Samples[i]
		if len(s.Seconds) == 0 {
			continue
		}
		s.Median, s.MedianCPU, s.GEMMGFLOPS = median(s.Seconds), median(s.CPU), median(s.gemmRates)
		if s.Median > 0 {
			s.PerSecond = float64(s.Units) / s.Median
			s.GFLOPS = r.GFLOP / s.Median
		}
		if s.Peer && peer == nil && s.PerSecond > 0 {
			peer = s // the first peer that ran: PyTorch 2 when it did
		}
	}
	if peer == nil || peer.PerSecond == 0 {
		return
	}
	for i := range r.Samples {
		if s := &r.Samples[i]; !s.Peer && s.PerSecond > 0 {
			s.Ratio = s.PerSecond / peer.PerSecond
		}
	}
}

// median of v (the mean of the two middle values for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is the interquartile range of v relative to its median, in percent.
func spread(v []float64) float64 {
	if len(v) < 4 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	q := func(p float64) float64 { return s[int(p*float64(len(s)-1)+0.5)] }
	m := median(v)
	if m == 0 {
		return 0
	}
	return 100 * (q(0.75) - q(0.25)) / m
}

// systems finds what can run: our worker (and its other BLAS build), PyTorch and Lucene. Each
// missing piece is a note naming what to install; nothing is installed.
func (o Options) systems(f Files, logf func(string, ...any)) ([]system, []string) {
	var systems []system
	var notes []string
	env := func() []string {
		t := strconv.Itoa(o.Threads)
		e := append(os.Environ(), "GOMAXPROCS="+t, "OPENBLAS_NUM_THREADS="+t, "OMP_NUM_THREADS="+t, "MKL_NUM_THREADS="+t)
		if os.Getenv("OMP_WAIT_POLICY") == "" {
			// OpenMP threads that spin while waiting make PyTorch up to 20 times slower on a
			// machine whose cores are busy with other processes; sleeping is its best setting
			// there and costs little on an idle one.
			e = append(e, "OMP_WAIT_POLICY=PASSIVE")
		}
		return e
	}
	ours := func(label, bin, tag string, extra ...string) system {
		return system{label: label, start: func(w Workload) *exec.Cmd {
			args := append([]string{"-worker", w.Name, "-dir", o.WorkDir}, extra...)
			if o.Profile {
				base := filepath.Join(o.WorkDir, w.Name+"."+tag)
				args = append(args, "-cpuprofile", base+".cpu.pprof", "-memprofile", base+".alloc.pprof")
			}
			c := exec.Command(bin, args...)
			c.Env = env()
			return c
		}}
	}
	selfBLAS := model.BLAS()
	selfLabel := "ours, " + shortBLAS(selfBLAS)
	systems = append(systems, ours(selfLabel, o.Self, tagOf(selfBLAS)))
	if o.BF16 {
		systems = append(systems, ours(selfLabel+", bf16", o.Self, tagOf(selfBLAS)+"-bf16", "-precision", "bf16"))
	}
	if o.OpenBLAS {
		other, tags := "Go kernel", ""
		if selfBLAS != "OpenBLAS" {
			other, tags = "OpenBLAS", "openblas"
		}
		logf("building our %s variant (go build -tags=%q ./cmd/bench)", other, tags)
		bin, err := buildVariant(o.WorkDir, tags)
		if err != nil {
			notes = append(notes, fmt.Sprintf("ours, %s: not run: %v", other, err))
		} else {
			systems = append(systems, ours("ours, "+other, bin, tagOf(other)))
		}
	}
	if !o.Peers {
		return systems, notes
	}
	script := filepath.Join(o.WorkDir, "peer.py")
	smolScript := filepath.Join(o.WorkDir, "smollm2_peer.py")
	if err := atomicfile.WriteFile(script, peerPy); err != nil {
		return systems, append(notes, fmt.Sprintf("PyTorch: not run: %v", err))
	}
	if err := atomicfile.WriteFile(smolScript, smolPeerPy); err != nil {
		return systems, append(notes, fmt.Sprintf("PyTorch: not run: %v", err))
	}
	torch := func(label, py string, extra ...string) system {
		return system{label: label, peer: PeerPyTorch, start: func(w Workload) *exec.Cmd {
			sc, data := script, f.Data
			if w.SciFact {
				data = f.SciFact
			}
			if w.SmolLM2 {
				sc, data = smolScript, f.SmolLM2
			}
			args := append([]string{sc, "--workload", w.Name, "--data", data, "--threads", strconv.Itoa(o.Threads)}, extra...)
			c := exec.Command(py, args...)
			c.Env = env()
			return c
		}}
	}
	venvPrefix := ""
	if o.Venv == "" {
		notes = append(notes, "PyTorch 2 (venv): not run: no venv given (bash tools/pyenv/setup.sh, then -venv)")
	} else if py, version, prefix, err := findTorch(o.Venv); err != nil {
		notes = append(notes, fmt.Sprintf("PyTorch 2 (venv): not run: %v (bash tools/pyenv/setup.sh)", err))
	} else {
		venvPrefix = prefix
		logf("PyTorch %s via %s", version, py)
		systems = append(systems, torch("PyTorch "+version+" eager", py))
		if o.BF16 {
			s := torch("PyTorch "+version+" eager, bf16 autocast", py, "--autocast")
			s.only = func(w Workload) bool { return !w.SmolLM2 }
			systems = append(systems, s)
		}
		if o.Compile {
			s := torch("PyTorch "+version+" torch.compile", py, "--compile")
			s.only = func(w Workload) bool { return w.Compile }
			systems = append(systems, s)
		}
		if v, err := llamaCppVersion(py, o.LlamaCppPath); err != nil {
			notes = append(notes, fmt.Sprintf("llama.cpp: not run: %v", err))
		} else {
			s := torch("llama.cpp (llama-cpp-python "+v+", Q4_1 GGUF)", py, "--backend", "llamacpp")
			s.only = func(w Workload) bool { return w.LlamaCpp }
			inner := s.start
			s.start = func(w Workload) *exec.Cmd {
				c := inner(w)
				if o.LlamaCppPath != "" {
					c.Env = append(c.Env, "PYTHONPATH="+o.LlamaCppPath)
				}
				return c
			}
			systems = append(systems, s)
		}
		if stVersion, err := pythonImports(py, "sentence_transformers"); err != nil {
			notes = append(notes, fmt.Sprintf("sentence-transformers: not run: %v", err))
		} else {
			s := torch("sentence-transformers "+stVersion+" encode()", py, "--st")
			s.only = func(w Workload) bool { return w.Encode }
			systems = append(systems, s)
			if o.BF16 {
				s := torch("sentence-transformers "+stVersion+" encode(), bf16 autocast", py, "--st", "--autocast")
				s.only = func(w Workload) bool { return w.Encode }
				systems = append(systems, s)
			}
		}
	}
	if py, version, prefix, err := findTorch(o.Python); err != nil {
		notes = append(notes, fmt.Sprintf("PyTorch (Debian): not run: %v (install Debian python3-torch, or give -python)", err))
	} else if prefix == venvPrefix {
		notes = append(notes, fmt.Sprintf("PyTorch (Debian): not run: %s is the venv's interpreter", py))
	} else {
		logf("PyTorch %s via %s", version, py)
		s := torch("PyTorch "+version+" (Debian)", py)
		s.only = func(w Workload) bool { return !w.SmolLM2 } // no transformers there
		systems = append(systems, s)
	}
	if cp, err := buildLucene(o.WorkDir, o.JavaLibs); err != nil {
		notes = append(notes, fmt.Sprintf("Lucene: not run: %v", err))
	} else {
		systems = append(systems, system{label: "Lucene 4.10", peer: PeerLucene, start: func(w Workload) *exec.Cmd {
			c := exec.Command("java", "-XX:ActiveProcessorCount="+strconv.Itoa(o.Threads), "-cp", cp, "LuceneBench",
				"--workload", w.Name, "--corpus", f.Corpus, "--queries", f.Queries, "--depth", "1000")
			c.Env = env()
			return c
		}})
	}
	return systems, notes
}

func shortBLAS(b string) string {
	if b == "OpenBLAS" {
		return "OpenBLAS"
	}
	if strings.HasPrefix(b, "Go AVX2") {
		return "Go kernel"
	}
	return b
}

func tagOf(b string) string {
	if b == "OpenBLAS" {
		return "openblas"
	}
	return "go"
}

// buildVariant builds ./cmd/bench with the given build tags into dir, from the module this
// program belongs to (found with go env GOMOD from the working directory).
func buildVariant(dir, tags string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("no go command to build it (%v)", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.Contains(mod, []byte("module github.com/ragtrain/ragtrain")) {
		return "", fmt.Errorf("run the bench from the ragtrain repository to build it")
	}
	name := "bench-go"
	if tags != "" {
		name = "bench-" + tags
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-tags="+tags, "-o", bin, "./cmd/bench")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		hint := ""
		if tags == "openblas" {
			hint = " (install Debian libopenblas-dev and a C compiler: cgo links -lopenblas)"
		}
		return "", fmt.Errorf("go build -tags=%s failed%s: %s", tags, hint, firstLines(string(out), 3))
	}
	return bin, nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// findTorch returns an interpreter that imports torch, torch's version and the interpreter's
// sys.prefix (which tells a virtual environment from the system's Python).
func findTorch(py string) (string, string, string, error) {
	cands := []string{py}
	if py == "" {
		cands = []string{"/usr/bin/python3", "python3"}
	}
	var tried []string
	for _, c := range cands {
		out, err := exec.Command(c, "-c", "import sys, torch; print(torch.__version__); print(sys.prefix)").Output()
		if v, prefix, ok := strings.Cut(strings.TrimSpace(string(out)), "\n"); err == nil && ok {
			return c, v, prefix, nil
		}
		tried = append(tried, c)
	}
	return "", "", "", fmt.Errorf("no Python with torch (tried %s)", strings.Join(tried, ", "))
}

// llamaCppVersion returns the version of llama_cpp as py imports it with PYTHONPATH path.
func llamaCppVersion(py, path string) (string, error) {
	c := exec.Command(py, "-c", "import llama_cpp; print(llama_cpp.__version__)")
	if path != "" {
		c.Env = append(os.Environ(), "PYTHONPATH="+path)
	}
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("%s cannot import llama_cpp (PYTHONPATH %q; pip install --target DIR llama-cpp-python, then -llamacpp-path DIR)", py, path)
	}
	return strings.TrimSpace(string(out)), nil
}

// pythonImports returns the version of module as py imports it.
func pythonImports(py, module string) (string, error) {
	out, err := exec.Command(py, "-c", "import "+module+"; print("+module+".__version__)").Output()
	if err != nil {
		return "", fmt.Errorf("%s cannot import %s", py, module)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildLucene compiles LuceneBench.java against Debian's Lucene 4.10 jars and returns the class
// path to run it.
func buildLucene(dir, libs string) (string, error) {
	if libs == "" {
		libs = "/usr/share/java"
	}
	core, _ := filepath.Glob(filepath.Join(libs, "lucene-core-4.10*.jar"))
	analyzers, _ := filepath.Glob(filepath.Join(libs, "lucene-analyzers-common-4.10*.jar"))
	if len(core) == 0 || len(analyzers) == 0 {
		return "", fmt.Errorf("no lucene-core-4.10*.jar and lucene-analyzers-common-4.10*.jar in %s (install Debian liblucene4.10-java)", libs)
	}
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("no %s on PATH (install Debian default-jdk-headless)", tool)
		}
	}
	src := filepath.Join(dir, "LuceneBench.java")
	if err := atomicfile.WriteFile(src, luceneJava); err != nil {
		return "", err
	}
	jars := core[0] + string(os.PathListSeparator) + analyzers[0]
	classes := filepath.Join(dir, "classes")
	if err := os.MkdirAll(classes, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command("javac", "-nowarn", "-cp", jars, "-d", classes, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac failed: %s", firstLines(string(out), 3))
	}
	return classes + string(os.PathListSeparator) + jars, nil
}

// Loads are the 1-minute load averages of a run (Result's Load fields).
type Loads struct {
	Start, End, Max, Settled float64
	SettleS                  float64 // seconds waited for Settled
	Threads                  int     // the bench's own threads (Options.Threads)
}

// Noisy reports whether other processes loaded the machine enough to make the timings noisy:
// above NoisyLoad before the bench started or after its threads stopped (Settled), or, while
// it ran, above NoisyLoad on top of its own Threads (Max). The end value read at once (End) is
// not used: it counts the bench's own threads.
func (l Loads) Noisy() bool {
	return l.Start > NoisyLoad || l.Settled > NoisyLoad || l.Max > float64(l.Threads)+NoisyLoad
}

// String is the loads in words, for the table's header and the verdicts.
func (l Loads) String() string {
	return fmt.Sprintf("load average %s at start, %s at most while measuring (10 s samples; the bench's own %d threads count %d), %s at the end, %s after %.0f s settling",
		loadString(l.Start), loadString(l.Max), l.Threads, l.Threads, loadString(l.End), loadString(l.Settled), l.SettleS)
}

// loadSampler records the load average from its start, every period, until stop.
type loadSampler struct {
	start float64
	mu    sync.Mutex
	max   float64
	done  chan struct{}
	wg    sync.WaitGroup
}

func startLoads(period time.Duration) *loadSampler {
	s := &loadSampler{start: loadAvg(), done: make(chan struct{})}
	s.max = s.start
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				l := loadAvg()
				s.mu.Lock()
				s.max = max(s.max, l)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// stop ends the sampling, then waits up to settle (polling every 5 s) for the load to fall to
// NoisyLoad.
func (s *loadSampler) stop(settle time.Duration, threads int, logf func(string, ...any)) Loads {
	close(s.done)
	s.wg.Wait()
	l := Loads{Start: s.start, Max: s.max, End: loadAvg(), Threads: threads}
	l.Max = max(l.Max, l.End)
	t0 := time.Now()
	l.Settled = l.End
	if settle > 0 && l.Settled > NoisyLoad {
		logf("waiting up to %v for the load average (%.2f) to settle to %.1f", settle, l.Settled, NoisyLoad)
		for l.Settled > NoisyLoad && time.Since(t0) < settle {
			time.Sleep(min(5*time.Second, settle-time.Since(t0)))
			l.Settled = loadAvg()
		}
	}
	l.SettleS = time.Since(t0).Seconds()
	return l
}

// writeJSON writes v as indented JSON to path, atomically ("" : nothing).
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	return atomicfile.WriteJSON(path, v)
}

// loadAvg is the 1-minute load average (-1 where /proc/loadavg cannot be read).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return x
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
