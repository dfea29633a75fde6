// Command bench times this project's training steps, encoding and BM25 side by side with
// PyTorch and Lucene 4.10 on the same inputs and threads, and prints one table (issue 8).
//
//	go run ./cmd/bench                        # everything; about 6 minutes on 2 busy cores
//	go run ./cmd/bench -only bi-transformer-step,bm25-query -reps 15
//
// The peers need Debian python3-torch, liblucene4.10-java and default-jdk-headless; our OpenBLAS
// build needs libopenblas-dev. The bench installs nothing: a missing piece is named and that
// system is skipped. With -worker it is one of its own worker processes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragtrain/ragtrain/bench"
)

func main() {
	var (
		worker   = flag.String("worker", "", "internal: serve this workload on stdin/stdout")
		dir      = flag.String("dir", "", "internal: the directory of the prepared inputs (with -worker)")
		cpuProf  = flag.String("cpuprofile", "", "internal: write a CPU profile of the timed runs (with -worker)")
		memProf  = flag.String("memprofile", "", "internal: write an allocation profile (with -worker)")
		dataset  = flag.String("data", "datasets/cranfield", "BEIR directory of Cranfield")
		only     = flag.String("only", "", "comma-separated workloads (default all: "+strings.Join(names(), ", ")+")")
		reps     = flag.Int("reps", 9, "timed runs per system; the median is reported")
		warmup   = flag.Int("warmup", 2, "untimed runs per system before timing (Lucene: at least 5)")
		threads  = flag.Int("threads", 2, "threads of every process (GOMAXPROCS, OPENBLAS_NUM_THREADS, torch.set_num_threads, JVM processors)")
		python   = flag.String("python", "", "Python interpreter with torch (default /usr/bin/python3, then python3)")
		openblas = flag.Bool("openblas", true, "also build and run our OpenBLAS variant (go build -tags openblas)")
		peers    = flag.Bool("peers", true, "run PyTorch and Lucene")
		profile  = flag.Bool("profile", false, "write CPU and allocation profiles of our workers into -work")
		work     = flag.String("work", "", "scratch directory (default a new temporary one, removed at the end unless -profile)")
		jsonOut  = flag.String("json", "", "also write the results as JSON to this file")
	)
	flag.Parse()
	if *worker != "" {
		if err := bench.Serve(*worker, *dir, os.Stdin, os.Stdout, bench.Profiles{CPU: *cpuProf, Mem: *memProf}); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*dataset, *only, *reps, *warmup, *threads, *python, *openblas, *peers, *profile, *work, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(dataset, only string, reps, warmup, threads int, python string, openblas, peers, profile bool, work, jsonOut string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	keep := work != "" || profile
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
	var wls []string
	if only != "" {
		wls = strings.Split(only, ",")
	}
	_, err = bench.Run(bench.Options{
		Dataset: dataset, Workloads: wls, Reps: reps, Warmup: warmup, Threads: threads, Python: python,
		OpenBLAS: openblas, Peers: peers, Self: self, WorkDir: work, Profile: profile, JSON: jsonOut,
		Command: strings.Join(append([]string{"go run ./cmd/bench"}, os.Args[1:]...), " "),
		Out:     os.Stdout, Log: os.Stderr,
	})
	if profile {
		fmt.Fprintf(os.Stderr, "profiles in %s: go tool pprof -top %s\n", work, filepath.Join(work, "<workload>.<go|openblas>.<cpu|alloc>.pprof"))
	}
	return err
}

func names() []string {
	var n []string
	for _, w := range bench.Workloads() {
		n = append(n, w.Name)
	}
	return n
}
