package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/eval"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// Files of a run directory.
const (
	ResolvedRecipeFile = "recipe.resolved.toml"
	MetricsFile        = "metrics.json"
	LogFile            = "log.jsonl"
	RunsDir            = "runs"
	// LockFile holds the pid of the process using the run directory, which holds an exclusive
	// flock on it (LockRunDir).
	LockFile = ".lock"
)

// LockRunDir takes an exclusive lock on the run directory dir: a flock on dir/.lock, which then
// holds this process's pid. It fails at once when another process (or another run of this
// one) holds the lock, naming the directory and the pid. unlock releases it; so does the
// process's exit, however it ends.
func LockRunDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run directory %s: lock: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := bounded.ReadFile(path, bounded.SmallFile)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("process %d", pid)
				if pid == os.Getpid() {
					holder += " (this one)"
				}
			}
			return nil, fmt.Errorf("run directory %s is in use by %s (it holds %s); wait for it to end or use another directory", dir, holder, path)
		}
		return nil, fmt.Errorf("run directory %s: lock %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("run directory %s: lock: %w", dir, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Flock(int(f.Fd()), unix.LOCK_UN)
			f.Close()
		})
	}, nil
}

// heldLocks are the run directories this process has locked through lockRun, until Run
// returns (releaseRun).
var heldLocks = struct {
	sync.Mutex
	unlock map[string]func()
}{unlock: map[string]func(){}}

// lockRun locks dir (LockRunDir) for the Run in progress.
func lockRun(dir string) error {
	unlock, err := LockRunDir(dir)
	if err != nil {
		return err
	}
	heldLocks.Lock()
	heldLocks.unlock[filepath.Clean(dir)] = unlock
	heldLocks.Unlock()
	return nil
}

// releaseRun releases the lock lockRun took on dir, if any.
func releaseRun(dir string) {
	if dir == "" {
		return
	}
	heldLocks.Lock()
	unlock := heldLocks.unlock[filepath.Clean(dir)]
	delete(heldLocks.unlock, filepath.Clean(dir))
	heldLocks.Unlock()
	if unlock != nil {
		unlock()
	}
}

// beginRun is what Run does before any heavy work: it checks that output_dir is writable
// (a fresh run) or locks the run directory to resume, so that a second process on the same
// directory fails at once. release(dir) releases the lock of the run directory Run returns.
func beginRun(rec *configs.Recipe, o Options) (release func(dir string), err error) {
	if o.ResumeDir == "" {
		if err := CheckOutputDir(rec, o.RecipePath); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(filepath.Join(o.ResumeDir, ResolvedRecipeFile)); err == nil {
		if err := lockRun(o.ResumeDir); err != nil {
			return nil, err
		}
	} // else the kind says "not a run directory"
	return func(dir string) {
		releaseRun(dir)
		releaseRun(o.ResumeDir)
	}, nil
}

// CheckOutputDir checks that run directories can be created below output_dir: it creates
// output_dir and creates and removes a file in it, then removes the directories it created,
// so that a run failing later leaves nothing behind. The error names the key, the recipe file
// (recipePath, else the recipe's name) and the OS error.
func CheckOutputDir(rec *configs.Recipe, recipePath string) error {
	if recipePath == "" {
		recipePath = fmt.Sprintf("recipe %q", rec.Name)
	}
	fail := func(err error) error {
		return fmt.Errorf("%s: output_dir: cannot create run directories in %s: %w", recipePath, rec.OutputDir, err)
	}
	top := "" // the outermost directory the check creates
	for p := filepath.Clean(rec.OutputDir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || filepath.Dir(p) == p {
			break
		}
		top = p
	}
	if top != "" {
		defer func() {
			for p := filepath.Clean(rec.OutputDir); ; p = filepath.Dir(p) {
				if os.Remove(p) != nil || p == top { // only empty directories go
					break
				}
			}
		}()
	}
	if err := os.MkdirAll(rec.OutputDir, 0o755); err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp(rec.OutputDir, ".write-check-*")
	if err != nil {
		return fail(err)
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// NewRunDir creates a fresh run directory <output_dir>/<name>-<YYYYMMDD-HHMMSS> (with a -2,
// -3, ... suffix when taken), locks it (LockRunDir; released when Run returns, or at exit) and
// writes the resolved recipe into it.
func NewRunDir(rec *configs.Recipe) (string, error) {
	if err := os.MkdirAll(rec.OutputDir, 0o755); err != nil {
		return "", fmt.Errorf("output_dir: %w", err)
	}
	base := filepath.Join(rec.OutputDir, rec.Name+"-"+time.Now().Format("20060102-150405"))
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !os.IsExist(err) {
			return "", err
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
	if err := lockRun(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, RunsDir), 0o755); err != nil {
		return "", err
	}
	return dir, rec.WriteResolved(filepath.Join(dir, ResolvedRecipeFile))
}

// WriteMetrics writes metrics.json: one flat JSON object from "<system>/<metric>" to a number,
// keys sorted. NaN and infinities are refused (JSON cannot hold them).
func WriteMetrics(dir string, m map[string]float64) error {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("metrics.json: %s is %v", k, v)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(m[k])
		fmt.Fprintf(&b, "  %s: %s", kb, vb)
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return atomicfile.WriteFile(filepath.Join(dir, MetricsFile), b.Bytes())
}

// ReadMetrics reads a metrics.json written by WriteMetrics.
func ReadMetrics(dir string) (map[string]float64, error) {
	b, err := bounded.ReadFile(filepath.Join(dir, MetricsFile), bounded.RunState)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, MetricsFile), err)
	}
	return m, nil
}

// System is one ranked run to evaluate, e.g. "bm25", "dense" or "rrf".
type System struct {
	Name string
	// File names the system in its TREC file runs/<split>.<File>.trec when Name is not
	// file-safe (a Matryoshka prefix "finetuned@256" is written as "finetuned_d256"); "" for Name.
	File string
	Run  eval.Run
}

// EvaluateSystems scores every system on qrels, writes runs/<split>.<system>.trec for each,
// adds "<system>/<metric>" to metrics (with "<system>.<split>/<metric>" when split is not the
// recipe's test split) and returns the table rows in the order given.
func EvaluateSystems(dir, split string, primary bool, qrels map[string]map[string]int,
	systems []System, metricNames []string, metrics map[string]float64) ([]eval.Row, error) {
	var rows []eval.Row
	for _, s := range systems {
		file := s.File
		if file == "" {
			file = s.Name
		}
		if err := eval.WriteTREC(filepath.Join(dir, RunsDir, split+"."+file+".trec"), s.Run, s.Name); err != nil {
			return nil, err
		}
		scores, err := eval.Evaluate(s.Run, qrels, metricNames)
		if err != nil {
			return nil, err
		}
		key := s.Name
		if !primary {
			key += "." + split
		}
		for m, v := range scores {
			metrics[key+"/"+m] = v
		}
		rows = append(rows, eval.Row{System: s.Name, Scores: scores})
	}
	return rows, nil
}

// untrainedFiles are what a run directory holds before its first step: the resolved recipe, the
// lock, the tokenizer (tokenizer.json, or reader_lm's tokenizer/ directory), the empty runs/, an
// empty log, the training examples dealt, the streamed corpus and the teacher's scores (all
// rebuilt by a new run).
var untrainedFiles = map[string]bool{ResolvedRecipeFile: true, LockFile: true, "tokenizer.json": true, "tokenizer": true, RunsDir: true,
	LogFile: true, "corpus": true, "teacher_scores.tsv": true, "train_examples.jsonl": true}

// RemoveIfUntrained removes the run directory dir when it holds nothing of a step: no
// checkpoint, no metrics, an empty log.jsonl, no file beyond untrainedFiles and nothing in
// runs/. Run calls it when a fresh run fails, so that a run failing before its first step (on
// a bad teacher cache, init_from, memory) leaves no directory that looks resumable.
func RemoveIfUntrained(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !untrainedFiles[e.Name()] {
			return
		}
	}
	if st, err := os.Stat(filepath.Join(dir, LogFile)); err == nil && st.Size() > 0 {
		return
	}
	if runs, err := os.ReadDir(filepath.Join(dir, RunsDir)); err != nil && !os.IsNotExist(err) || len(runs) > 0 {
		return
	}
	os.RemoveAll(dir)
}
