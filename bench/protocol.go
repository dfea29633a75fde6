package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ragtrain/ragtrain/model"
)

// The worker protocol, the same for our Go worker, the PyTorch script and the Java program: the
// worker builds its workload and prints one JSON line {"ready": true, "system": ..., "threads":
// ...}; then, for each line "run" on its standard input, it does one timed run and prints
// {"seconds": s, "units": n, "loss": x, "digest": d} (time measured inside the worker, so process
// start, imports and JVM start are left out); on "quit" it prints {"peak_rss_kib": k} (VmHWM of
// its own /proc/self/status) and exits. A failure prints {"error": "..."}. Lines that are not
// JSON objects (warnings) are passed to the orchestrator's standard error.
type message struct {
	Ready      bool    `json:"ready,omitempty"`
	System     string  `json:"system,omitempty"`
	Threads    int     `json:"threads,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	Units      int     `json:"units,omitempty"`
	Loss       float64 `json:"loss,omitempty"`
	Digest     string  `json:"digest,omitempty"`
	PeakRSSKiB int64   `json:"peak_rss_kib,omitempty"`
	// GEMMFLOPs and GEMMSeconds are the flops and wall time of the run's matrix products that
	// our worker counted (model.CountGEMM); peers send neither.
	GEMMFLOPs   float64 `json:"gemm_flops,omitempty"`
	GEMMSeconds float64 `json:"gemm_seconds,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Profiles name the pprof files a Go worker writes ("" for none): CPU over its timed runs,
// allocations (alloc_space) at quit.
type Profiles struct {
	CPU, Mem string
}

// Serve is our side of the protocol: it builds workload name from the files Prepare wrote in
// dir, then answers in until "quit" or end of input.
func Serve(name, dir string, in io.Reader, out io.Writer, prof Profiles) error {
	enc := json.NewEncoder(out)
	fail := func(err error) error {
		_ = enc.Encode(message{Error: err.Error()})
		return err
	}
	j, err := newJob(name, dir)
	if err != nil {
		return fail(err)
	}
	defer j.close()
	if prof.Mem != "" {
		runtime.MemProfileRate = 64 << 10
	}
	model.CountGEMM(true)
	sys := "ragtrain (" + model.BLAS() + ")"
	if model.MatmulPrecision() == model.BFloat16 {
		sys = "ragtrain (bf16 products: " + model.BF16Kernel() + ")"
	}
	if err := enc.Encode(message{Ready: true, System: sys, Threads: runtime.GOMAXPROCS(0)}); err != nil {
		return err
	}
	profiling := false
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch cmd := strings.TrimSpace(sc.Text()); cmd {
		case "run":
			if prof.CPU != "" && !profiling {
				f, err := os.Create(prof.CPU)
				if err != nil {
					return fail(err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fail(err)
				}
				defer pprof.StopCPUProfile()
				profiling = true
			}
			model.GEMMCounts() // what building the job counted
			t0, c0 := time.Now(), cpuSeconds()
			units, err := j.run()
			sec, cpu := time.Since(t0).Seconds(), cpuSeconds()-c0
			if err != nil {
				return fail(err)
			}
			gf, gs := model.GEMMCounts()
			loss, digest := j.check()
			if err := enc.Encode(message{Seconds: sec, CPUSeconds: cpu, Units: units, Loss: loss, Digest: digest, GEMMFLOPs: gf, GEMMSeconds: gs}); err != nil {
				return err
			}
		case "quit":
			if profiling {
				pprof.StopCPUProfile()
			}
			if prof.Mem != "" {
				if err := writeHeapProfile(prof.Mem); err != nil {
					return fail(err)
				}
			}
			return enc.Encode(message{PeakRSSKiB: PeakRSSKiB()})
		default:
			return fail(fmt.Errorf("bench: unknown command %q", cmd))
		}
	}
	return sc.Err()
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PeakRSSKiB is the peak resident set of this process in KiB (VmHWM in /proc/self/status), 0
// where that file does not exist.
func PeakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return parseVmHWM(string(b))
}

func parseVmHWM(status string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return n
				}
			}
		}
	}
	return 0
}

// worker is a running worker process seen from the orchestrator.
type worker struct {
	label  string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	done   chan error
	system string
	stderr *tailBuffer
}

// startWorker starts cmd and waits up to timeout for its ready line.
func startWorker(label string, cmd *exec.Cmd, timeout time.Duration) (*worker, error) {
	w := &worker{label: label, cmd: cmd, lines: make(chan string, 16), done: make(chan error, 1), stderr: &tailBuffer{max: 4000}}
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		w.done <- cmd.Wait()
	}()
	m, err := w.read(timeout)
	if err != nil {
		w.kill()
		return nil, err
	}
	if !m.Ready {
		w.kill()
		return nil, fmt.Errorf("%s: expected a ready message, got %+v", label, m)
	}
	w.system = m.System
	return w, nil
}

// read returns the next message, skipping (and echoing to stderr) lines that are not JSON.
func (w *worker) read(timeout time.Duration) (message, error) {
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				err := <-w.done
				return message{}, fmt.Errorf("%s exited (%v) without answering; its stderr ends:\n%s", w.label, err, w.stderr.String())
			}
			if !strings.HasPrefix(strings.TrimSpace(line), "{") {
				fmt.Fprintf(os.Stderr, "[%s] %s\n", w.label, line)
				continue
			}
			var m message
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return message{}, fmt.Errorf("%s: bad message %q: %w", w.label, line, err)
			}
			if m.Error != "" {
				return message{}, fmt.Errorf("%s: %s", w.label, m.Error)
			}
			return m, nil
		case <-deadline:
			return message{}, fmt.Errorf("%s: no answer within %v", w.label, timeout)
		}
	}
}

func (w *worker) send(cmd string, timeout time.Duration) (message, error) {
	if _, err := io.WriteString(w.stdin, cmd+"\n"); err != nil {
		return message{}, fmt.Errorf("%s: %w; its stderr ends:\n%s", w.label, err, w.stderr.String())
	}
	return w.read(timeout)
}

// quit asks for the peak RSS and waits for the process to end.
func (w *worker) quit(timeout time.Duration) (int64, error) {
	m, err := w.send("quit", timeout)
	w.stdin.Close()
	if err != nil {
		w.kill()
		return 0, err
	}
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.kill()
	}
	return m.PeakRSSKiB, nil
}

func (w *worker) kill() {
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
