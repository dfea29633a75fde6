// Command bench times this project's training steps, encoding and BM25 side by side with
// PyTorch and Lucene 4.10 on the same inputs and threads, and prints one table (issue 8).
//
//	go run ./cmd/bench                        # everything; about 6 minutes on 2 busy cores
//	go run ./cmd/bench -only bi-transformer-step,bm25-query -reps 15
//	VENV=/path/.venv go run ./cmd/bench -only minilm-train,minilm-encode -minilm-b 16
//	go run ./cmd/bench -only ann -ann-n 200000    # HNSW against exact search (issue 17)
//	go run ./cmd/bench -only scale -scale-n 100000,500000,2000000   # time and memory as the corpus grows
//	go run ./cmd/bench -only smollm2-train-full,smollm2-train-lora,smollm2-generate-b1,smollm2-generate-b8 -llamacpp-path DIR
//
// The ann workload runs only when named in -only: it measures exact search (index.Flat) and
// HNSW (index/ann) on random projections of a synthetic collection, in this process. So does
// the scale workload: it builds cmd/train, generates the synthetic corpora it lacks
// (<-scale-data>/synth-<N>), runs recipes/scale-synth.toml on each as a child process and
// prints its wall time, CPU time and peak RSS (getrusage of the child), with the verdict whether
// each grows at most linearly and the largest peak stays within -scale-max-rss-mib.
//
// The peers need Debian python3-torch, liblucene4.10-java and default-jdk-headless; our OpenBLAS
// build needs libopenblas-dev. The bench installs nothing: a missing piece is named and that
// system is skipped. With -worker it is one of its own worker processes.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ragtrain/ragtrain/bench"
	"github.com/ragtrain/ragtrain/model"
)

func main() {
	var (
		worker   = flag.String("worker", "", "internal: serve this workload on stdin/stdout")
		dir      = flag.String("dir", "", "internal: the directory of the prepared inputs (with -worker)")
		cpuProf  = flag.String("cpuprofile", "", "internal: write a CPU profile of the timed runs (with -worker)")
		memProf  = flag.String("memprofile", "", "internal: write an allocation profile (with -worker)")
		prec     = flag.String("precision", "float32", "internal: the worker's matrix products, float32 or bf16 (with -worker)")
		bf16     = flag.Bool("bf16", false, "also run ours with bfloat16 products (train.precision = \"bf16\") and PyTorch 2 / sentence-transformers under torch.autocast(\"cpu\", dtype=torch.bfloat16)")
		dataset  = flag.String("data", "datasets/cranfield", "BEIR directory of Cranfield")
		only     = flag.String("only", "", "comma-separated workloads (default all: "+strings.Join(names(), ", ")+"); also "+bench.ANNWorkload+" and "+strings.Join(smolNames(), ", ")+", only when named")
		reps     = flag.Int("reps", 9, "timed runs per system; the median is reported")
		warmup   = flag.Int("warmup", 2, "untimed runs per system before timing (Lucene: at least 5)")
		threads  = flag.Int("threads", 2, "threads of every process (GOMAXPROCS, OPENBLAS_NUM_THREADS, torch.set_num_threads, JVM processors)")
		python   = flag.String("python", "", "Debian's Python with torch 1.13, the second PyTorch peer (default /usr/bin/python3, then python3)")
		venv     = flag.String("venv", "", "the repository's virtual environment (tools/pyenv/setup.sh), the first PyTorch peer: PyTorch 2, torch.compile, sentence-transformers (default $VENV, else .venv)")
		compile  = flag.Bool("compile", true, "also run PyTorch 2 with torch.compile on the pretrained-shape workloads")
		scifact  = flag.String("scifact", "datasets/scifact", "BEIR directory of SciFact (the pretrained-shape workloads)")
		pretrain = flag.String("pretrained", "pretrained/all-MiniLM-L6-v2", "model directory whose tokenizer makes the SciFact token ids (absent: a WordPiece vocabulary trained on SciFact)")
		miniB    = flag.Int("minilm-b", bench.DefaultSciFactShapes().BiB, "claims per minilm-train step (each with a positive and a hard negative; peak RSS 1.3 GB at 8)")
		lists    = flag.Int("minilm-lists", bench.DefaultSciFactShapes().CrossLists, "lists of 8 pairs per minilm-cross-train step")
		encodeN  = flag.Int("encode-n", bench.DefaultSciFactShapes().EncodeN, "SciFact passages per minilm-encode and bge-small-encode run")
		scoreN   = flag.Int("score-n", bench.DefaultSciFactShapes().ScoreN, "pairs per minilm-cross-score run")
		smollm2  = flag.String("smollm2", "pretrained/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf", "the GGUF of the SmolLM2 workloads (bash tools/pretrained/get.sh SmolLM2-135M-Instruct); they run only when named in -only")
		llamaCpp = flag.String("llamacpp-path", os.Getenv("LLAMACPP_PYTHONPATH"), "PYTHONPATH under which the venv's Python imports llama_cpp (pip install --target DIR llama-cpp-python), the SmolLM2 generation workloads' second peer (default $LLAMACPP_PYTHONPATH)")
		smolMB   = flag.Int("smollm2-micro", 0, "rows per forward/backward pass of our SmolLM2 training step (reader_lm.micro_batch; 0: all 4 at once)")
		smolCk   = flag.Bool("smollm2-checkpointing", false, "our SmolLM2 training step with gradient checkpointing (reader_lm.gradient_checkpointing)")
		timeout  = flag.Duration("timeout", 10*time.Minute, "longest wait for one worker's answer (start or one run) before it is killed")
		openblas = flag.Bool("openblas", true, "also build and run our OpenBLAS variant (go build -tags openblas)")
		peers    = flag.Bool("peers", true, "run PyTorch and Lucene")
		profile  = flag.Bool("profile", false, "write CPU and allocation profiles of our workers into -work")
		work     = flag.String("work", "", "scratch directory (default a new temporary one, removed at the end unless -profile)")
		jsonOut  = flag.String("json", "", "also write the results as JSON to this file")
		annN     = flag.Int("ann-n", bench.DefaultANNOptions().Passages, "ann: synthetic passages (the issue's target is 1000000)")
		annQ     = flag.Int("ann-queries", bench.DefaultANNOptions().Queries, "ann: synthetic queries searched")
		annM     = flag.Int("ann-m", bench.DefaultANNOptions().Params.M, "ann: HNSW M (2M links on layer 0)")
		annEfC   = flag.Int("ann-efc", bench.DefaultANNOptions().Params.EfConstruction, "ann: HNSW efConstruction")
		annEf    = flag.String("ann-ef", "32,64,128,256,512,1024,2048", "ann: comma-separated efSearch values")
		annSeed  = flag.Uint64("ann-seed", bench.DefaultANNOptions().Seed, "ann: seed of the collection, the projection and the HNSW levels")
		scaleN   = flag.String("scale-n", "100000,500000,2000000", "scale: comma-separated corpus sizes in passages")
		scaleDat = flag.String("scale-data", bench.DefaultScaleOptions().DataDir, "scale: directory of the synthetic corpora (synth-<N>, generated when absent)")
		scaleRun = flag.String("scale-runs", bench.DefaultScaleOptions().RunsDir, "scale: output_dir of the runs and their logs")
		scaleRec = flag.String("scale-recipe", bench.DefaultScaleOptions().Recipe, "scale: the recipe run at each size")
		scaleTr  = flag.String("scale-train", "", "scale: a built train command (default: go build ./cmd/train into a temporary directory)")
		scaleMax = flag.Int64("scale-max-rss-mib", bench.DefaultScaleOptions().MaxRSSKiB>>10, "scale: largest peak RSS allowed at the largest size, MiB")
		scaleTol = flag.Float64("scale-tolerance", bench.DefaultScaleTolerance, "scale: the growth exponent of wall time, CPU time and peak RSS over the sizes may exceed 1 by this much (measurement noise; see bench.DefaultScaleTolerance)")
		fmaPeak  = flag.Duration("fma-peak", time.Second, "how long each FMA peak measurement runs before minilm-train (every vector width, 1 and -threads threads; 0: none)")
		settle   = flag.Duration("settle", bench.DefaultSettle, "after the timed runs, wait up to this long for the load average to fall to 1.5 (the bench's own threads hold it near -threads while it measures); the verdicts read the settled value (negative: no wait)")
	)
	scaleSet := recipeSet{}
	flag.Var(scaleSet, "scale-set", "scale: a recipe override key=value (a TOML value, e.g. train.steps=5) of a key the recipe sets; repeatable")
	flag.Parse()
	if *worker != "" {
		p, err := model.ParsePrecision(*prec)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(2)
		}
		model.SetMatmulPrecision(p)
		if err := bench.Serve(*worker, *dir, os.Stdin, os.Stdout, bench.Profiles{CPU: *cpuProf, Mem: *memProf}); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		return
	}
	ss := bench.DefaultSciFactShapes()
	ss.BiB, ss.CrossLists, ss.EncodeN, ss.ScoreN = *miniB, *lists, *encodeN, *scoreN
	if *venv == "" {
		*venv = os.Getenv("VENV")
	}
	if *venv == "" {
		*venv = ".venv"
	}
	o := bench.Options{
		Dataset: *dataset, Reps: *reps, Warmup: *warmup, Threads: *threads, Python: *python,
		Venv: filepath.Join(*venv, "bin", "python"), Compile: *compile, SciFact: *scifact, Pretrained: *pretrain, SciFactShapes: ss,
		SmolLM2: *smollm2, LlamaCppPath: *llamaCpp, Timeout: *timeout, SmolLM2Shapes: smolShapes(*smolMB, *smolCk),
		OpenBLAS: *openblas, BF16: *bf16, Peers: *peers, Profile: *profile, JSON: *jsonOut, FMAPeak: *fmaPeak, Settle: *settle,
		Command: strings.Join(append([]string{"go run ./cmd/bench"}, os.Args[1:]...), " "),
		Out:     os.Stdout, Log: os.Stderr,
	}
	workloads := strings.Split(*only, ",")
	if i := slices.Index(workloads, bench.ScaleWorkload); i >= 0 {
		if workloads = slices.Delete(workloads, i, i+1); len(workloads) > 0 {
			fmt.Fprintln(os.Stderr, "bench: run scale on its own (-only scale)")
			os.Exit(2)
		}
		s := bench.DefaultScaleOptions()
		s.DataDir, s.RunsDir, s.Recipe, s.Train, s.MaxRSSKiB, s.Tolerance = *scaleDat, *scaleRun, *scaleRec, *scaleTr, *scaleMax<<10, *scaleTol
		s.Command, s.JSON, s.Out, s.Log = o.Command, *jsonOut, os.Stdout, os.Stderr
		var err error
		s.Set = scaleSet
		if s.Sizes, err = scaleSizes(*scaleN); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		if err := runScale(s); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if i := slices.Index(workloads, bench.ANNWorkload); i >= 0 {
		a := bench.DefaultANNOptions()
		a.Passages, a.Queries, a.Params.M, a.Params.EfConstruction, a.Threads = *annN, *annQ, *annM, *annEfC, *threads
		a.Seed, a.Params.Seed = *annSeed, *annSeed
		a.EfSearch = nil
		for _, f := range strings.Split(*annEf, ",") {
			ef, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || ef < 1 {
				fmt.Fprintf(os.Stderr, "bench: -ann-ef: %q is not a positive integer\n", f)
				os.Exit(2)
			}
			a.EfSearch = append(a.EfSearch, ef)
		}
		a.Command, a.Out, a.Log = o.Command, os.Stdout, os.Stderr
		if workloads = slices.Delete(workloads, i, i+1); len(workloads) == 0 {
			a.JSON = *jsonOut
		} else if *jsonOut != "" {
			fmt.Fprintln(os.Stderr, "bench: -json with ann and other workloads: run ann on its own")
			os.Exit(2)
		}
		if _, err := bench.RunANN(a); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		if len(workloads) == 0 {
			return
		}
		*only = strings.Join(workloads, ",")
	}
	if err := run(o, *only, *work); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o bench.Options, only, work string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	keep := work != "" || o.Profile
	if work == "" {
		if work, err = os.MkdirTemp("", "ragtrain-bench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if work, err = filepath.Abs(work); err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(work)
	}
	if only != "" {
		o.Workloads = strings.Split(only, ",")
	}
	o.Self, o.WorkDir = self, work
	_, err = bench.Run(o)
	if o.Profile {
		fmt.Fprintf(os.Stderr, "profiles in %s: go tool pprof -top %s\n", work, filepath.Join(work, "<workload>.<go|openblas>.<cpu|alloc>.pprof"))
	}
	return err
}

// scaleSizes parses -scale-n.
func scaleSizes(sizes string) ([]int, error) {
	var n []int
	for _, f := range strings.Split(sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-scale-n: %q is not a positive integer", f)
		}
		n = append(n, v)
	}
	return n, nil
}

// recipeSet is the repeatable -scale-set key=value flag.
type recipeSet map[string]string

func (s recipeSet) String() string { return fmt.Sprint(map[string]string(s)) }

func (s recipeSet) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if k, v = strings.TrimSpace(k), strings.TrimSpace(v); !ok || k == "" || v == "" {
		return fmt.Errorf("%q is not key=value", kv)
	}
	s[k] = v
	return nil
}

// runScale builds the train command unless -scale-train names one, then runs the workload;
// a negative verdict exits 1 too.
func runScale(s bench.ScaleOptions) error {
	if s.Train == "" {
		tmp, err := os.MkdirTemp("", "ragtrain-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		s.Train = filepath.Join(tmp, "train")
		build := exec.Command("go", "build", "-o", s.Train, "./cmd/train")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("scale: go build ./cmd/train: %w", err)
		}
	}
	res, err := bench.RunScale(s)
	if err == nil && !res.Verdict.OK {
		err = fmt.Errorf("scale: the verdict is FAIL")
	}
	return err
}

func names() []string {
	var n []string
	for _, w := range bench.Workloads() {
		if !w.SmolLM2 {
			n = append(n, w.Name)
		}
	}
	return n
}

func smolShapes(micro int, ckpt bool) bench.SmolLM2Shapes {
	s := bench.DefaultSmolLM2Shapes()
	s.Micro, s.Checkpoint = micro, ckpt
	return s
}

func smolNames() []string {
	var n []string
	for _, w := range bench.Workloads() {
		if w.SmolLM2 {
			n = append(n, w.Name)
		}
	}
	return n
}
