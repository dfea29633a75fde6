package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/ragtrain/ragtrain/model"
)

// printTable writes the results as a Markdown table, then the rankings check and the issue's
// targets.
func (o Options) printTable(results []Result, ld Loads) {
	w := o.Out
	fmt.Fprintf(w, "# ragtrain speed benchmark\n\n")
	fmt.Fprintf(w, "command: `%s`\n", o.Command)
	fmt.Fprintf(w, "machine: %s, %d logical CPUs, %s/%s; every process limited to %d threads; %s\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, o.Threads, ld)
	fmt.Fprintf(w, "timing: median of %d timed runs per system after %d warm-up runs (Lucene: 5), systems alternating run by run, "+
		"time measured inside each process (start, imports and JVM start excluded); spread = interquartile range / median; "+
		"CPU = median CPU time of the process per run, all its threads (steadier than wall time on a shared machine); "+
		"GFLOP/s = matrix-product work of one run (in the workload's row) / median; peak RSS = VmHWM of each worker process; "+
		"ours/peer = our throughput / that of the workload's first peer (PyTorch 2 eager when it ran)\n\n",
		o.Reps, o.Warmup)
	fmt.Fprintln(w, "| workload | system | median | spread | throughput | ours/peer | CPU | GFLOP/s | peak RSS |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		title := r.Workload.Title
		if r.GFLOP > 0 {
			title += fmt.Sprintf(" (%.3g GFLOP)", r.GFLOP)
		}
		for i, s := range r.Samples {
			cell := ""
			if i == 0 {
				cell = title
			}
			if s.Err != "" && len(s.Seconds) == 0 {
				verb := "failed"
				if s.Peer {
					verb = "not run"
				}
				fmt.Fprintf(w, "| %s | %s | %s: %s | | | | | | |\n", cell, s.Label, verb, oneLine(s.Err))
				continue
			}
			ratio := ""
			if s.Ratio > 0 {
				ratio = fmt.Sprintf("%.2fx", s.Ratio)
			}
			gf := ""
			if s.GFLOPS > 0 {
				gf = fmt.Sprintf("%.1f", s.GFLOPS)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.0f%% | %s %s/s | %s | %s | %s | %s |\n", cell, s.Label, duration(s.Median),
				spread(s.Seconds), number(s.PerSecond), r.Workload.Unit, ratio, duration(s.MedianCPU), gf, mib(s.PeakRSS))
		}
		if r.Note != "" {
			fmt.Fprintf(w, "| | %s | | | | | | | |\n", r.Note)
		}
		if r.Size != "" {
			fmt.Fprintf(w, "| | size: %s | | | | | | | |\n", strings.ReplaceAll(r.Size, "|", "/"))
		}
	}
	fmt.Fprintln(w)
	for _, r := range results {
		if r.Name == "bm25-query" {
			fmt.Fprintln(w, rankingCheck(r))
		}
	}
	for _, r := range results {
		if len(r.FMAPeaks) > 0 {
			fmt.Fprintf(w, "FMA peak (%s, before the %s runs): %s\n", peakMethod, r.Name, peaksString(r.FMAPeaks))
		}
	}
	o.printTargets(w, results, ld)
}

const peakMethod = "model.FMAPeak: a loop of 12 independent float32 FMA chains on registers of each vector width, " +
	"one goroutine per thread, no loads or stores"

func peaksString(ps []FMAPeak) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d-bit on %d thread(s) %.1f GFLOP/s", p.Width, p.Threads, p.GFLOPS))
	}
	return strings.Join(parts, ", ")
}

// PeakShare is the bar for the matrix products of the MiniLM training step: at least
// this share of the measured FMA peak.
const PeakShare = 0.5

// bestPeak is the highest FMA peak measured on threads threads (nil if none was).
func bestPeak(ps []FMAPeak, threads int) *FMAPeak {
	var best *FMAPeak
	for i := range ps {
		if ps[i].Threads == threads && (best == nil || ps[i].GFLOPS > best.GFLOPS) {
			best = &ps[i]
		}
	}
	return best
}

// printPeakShare judges the matrix products of r (our default build's) against the best FMA peak
// measured on o.Threads threads, by their own rate when our worker counted it (GEMMGFLOPS: the
// flops of the Linear and MatMul products and their gradients over the wall time spent in
// them), else by the run's GEMM FLOPs counted from the shapes over its median wall time
// (GFLOPS, everything else the step does counting as time); both are printed.
func (o Options) printPeakShare(w io.Writer, r Result, verdict func(bool) string) {
	title := fmt.Sprintf("%s: matrix products >= %.0f%% of the FMA peak", r.Workload.Title, 100*PeakShare)
	peak := bestPeak(r.FMAPeaks, o.Threads)
	var ours *Sample // the default build's, else OpenBLAS's
	for i := range r.Samples {
		if s := &r.Samples[i]; !s.Peer && s.GFLOPS > 0 && (ours == nil || strings.Contains(ours.Label, "OpenBLAS")) {
			ours = s
		}
	}
	if peak == nil || ours == nil || peak.GFLOPS <= 0 {
		fmt.Fprintf(w, "- %s: not measured\n", title)
		return
	}
	of := fmt.Sprintf("%.1f GFLOP/s (the %d-bit FMA loop on %d threads, the best measured; our kernel's width: %d bits)",
		peak.GFLOPS, peak.Width, peak.Threads, model.KernelWidth())
	step := fmt.Sprintf("whole step %.1f GFLOP/s (its GEMM FLOPs / its median wall time) = %.0f%%", ours.GFLOPS, 100*ours.GFLOPS/peak.GFLOPS)
	share := ours.GFLOPS / peak.GFLOPS
	if ours.GEMMGFLOPS > 0 {
		share = ours.GEMMGFLOPS / peak.GFLOPS
		fmt.Fprintf(w, "- %s: %.1f GFLOP/s in the products themselves (counted GEMM flops / time in GEMM, attention's blocks excluded) = %.0f%% of %s; %s; with %s: %s\n",
			title, ours.GEMMGFLOPS, 100*share, of, step, ours.Label, verdict(share >= PeakShare))
		return
	}
	fmt.Fprintf(w, "- %s: %s of %s, with %s: %s\n", title, step, of, ours.Label, verdict(share >= PeakShare))
}

// NoisyLoad is the 1-minute load average above which a run's speed verdicts are not given: on
// this 2-core machine other processes then take a share of the cores that differs from system
// to system, and ratios move by more than the targets' margins.
const NoisyLoad = 1.5

func loadString(l float64) string {
	if l < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f", l)
}

// rankingCheck compares the digests of our BM25 rankings and Lucene's.
func rankingCheck(r Result) string {
	var ours, lucene string
	for _, s := range r.Samples {
		if s.Peer {
			lucene = s.Digest
		} else if ours == "" {
			ours = s.Digest
		}
	}
	switch {
	case ours == "" || lucene == "":
		return "BM25 rankings: not compared (a side did not run)"
	case ours == lucene:
		return fmt.Sprintf("BM25 rankings: identical to Lucene's (hit counts and top-10 scores of every query, bit for bit; digest %s)", ours)
	}
	return fmt.Sprintf("BM25 rankings: DIFFER from Lucene's (digest %s, Lucene %s)", ours, lucene)
}

// printTargets checks the "done when" figures.
// Speed verdicts read "noisy" instead of PASS or FAIL when the load was above NoisyLoad at the
// start or end; the memory verdict does not depend on the load and is always given.
func (o Options) printTargets(w io.Writer, results []Result, ld Loads) {
	fmt.Fprintln(w, "\ntargets (issue 8):")
	verdict := func(ok bool) string {
		if ld.Noisy() {
			return fmt.Sprintf("noisy (%s; other processes above %.1f: no verdict)", ld, NoisyLoad)
		}
		return passFail(ok)
	}
	for _, r := range results {
		if r.Workload.Target == 0 {
			continue
		}
		s, which := pick(r)
		if s == nil {
			fmt.Fprintf(w, "- %s >= %.1fx %s: not measured\n", r.Workload.Title, r.Workload.Target, r.Workload.Peer)
			continue
		}
		fmt.Fprintf(w, "- %s >= %.1fx %s: %.2fx with %s: %s\n", r.Workload.Title, r.Workload.Target, peerName(r), s.Ratio, which, verdict(s.Ratio >= r.Workload.Target))
	}
	for _, r := range results {
		if len(r.FMAPeaks) > 0 {
			o.printPeakShare(w, r, verdict)
		}
	}
	var worse []string
	compared := 0
	for _, r := range results {
		if r.Workload.Peer != PeerPyTorch {
			continue
		}
		var peer int64
		for _, s := range r.Samples {
			if s.Peer && peer == 0 {
				peer = s.PeakRSS // the first peer's, as the ratios
			}
		}
		if peer == 0 {
			continue
		}
		for _, s := range r.Samples {
			if !s.Peer && s.PeakRSS > 0 {
				compared++
				if s.PeakRSS > peer {
					worse = append(worse, fmt.Sprintf("%s %s %s > %s", r.Name, s.Label, mib(s.PeakRSS), mib(peer)))
				}
			}
		}
	}
	switch {
	case compared == 0:
		fmt.Fprintln(w, "- peak memory <= PyTorch's: not measured")
	case len(worse) == 0:
		fmt.Fprintf(w, "- peak memory <= PyTorch's: every one of %d comparisons: PASS\n", compared)
	default:
		fmt.Fprintf(w, "- peak memory <= PyTorch's: FAIL in %s\n", strings.Join(worse, "; "))
	}
}

// pick returns the sample a target is judged on: OpenBLAS when it ran, else our other build.
func pick(r Result) (*Sample, string) {
	var best *Sample
	for i := range r.Samples {
		s := &r.Samples[i]
		if s.Peer || s.Ratio == 0 {
			continue
		}
		if strings.Contains(s.Label, "OpenBLAS") {
			return s, s.Label
		}
		if best == nil {
			best = s
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, best.Label + " (OpenBLAS not run)"
}

func peerName(r Result) string {
	for _, s := range r.Samples {
		if s.Peer && s.PerSecond > 0 {
			return s.Label
		}
	}
	return r.Workload.Peer
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func duration(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

func number(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func mib(kib int64) string {
	if kib == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
