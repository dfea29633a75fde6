package experiment

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/configs"
)

// stubKind is a kind registered for the base's own tests (the real kinds live in their own
// packages, which import this one): its run only says that it ran.
const stubKind = "stub"

var errStubRan = errors.New("the stub kind ran")

func init() {
	Register(stubKind, func(context.Context, *configs.Recipe, Options) (string, error) { return "", errStubRan }, configs.KindSpec{Sections: []string{"data", "tokenizer", "model", "train", "eval"}})
}

// lockChildEnv names the run directory a child test process locks (TestLockRunDirTwoProcesses).
const lockChildEnv = "RAGTRAIN_TEST_LOCK_CHILD"

// TestLockChild is the child of TestLockRunDirTwoProcesses: it locks the directory, says
// "locked" and holds the lock until its stdin closes.
func TestLockChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("the child process of TestLockRunDirTwoProcesses")
	}
	unlock, err := LockRunDir(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	defer unlock()
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
}

// startLockHolder runs this test binary as a child process holding the lock on dir; closing
// the returned writer ends it.
func startLockHolder(t *testing.T, dir string) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	return cmd.Process.Pid, func() {
		stdin.Close()
		cmd.Wait()
	}
}

// TestLockRunDirTwoProcesses: while another process holds a run directory's lock, locking it
// fails at once naming the directory and that process's pid; once it exits, the lock is free.
func TestLockRunDirTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	pid, stop := startLockHolder(t, dir)
	_, err := LockRunDir(dir)
	if err == nil {
		stop()
		t.Fatal("a second process locked a locked run directory")
	}
	for _, w := range []string{dir, "process " + strconv.Itoa(pid)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	stop()
	unlock, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("after the holder exited: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, LockFile))
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("%s holds %q, want this pid %d", LockFile, got, os.Getpid())
	}
	// The same process cannot take it twice either (two Runs on one directory).
	if _, err := LockRunDir(dir); err == nil || !strings.Contains(err.Error(), "(this one)") {
		t.Errorf("second lock in one process: %v", err)
	}
	unlock()
	unlock() // idempotent
	unlock2, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}

// TestResumeOfALockedRunFailsAtOnce: Run -resume on a run directory another process holds
// fails before reading any data (the recipe's data directory does not even exist).
func TestResumeOfALockedRunFailsAtOnce(t *testing.T) {
	runDir := t.TempDir()
	rec := configs.Defaults()
	rec.Kind = stubKind
	rec.Data.Dir = filepath.Join(runDir, "no-such-data")
	rec.OutputDir = filepath.Join(runDir, "out")
	if err := os.WriteFile(filepath.Join(runDir, ResolvedRecipeFile), []byte("kind = \"retriever\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid, stop := startLockHolder(t, runDir)
	defer stop()
	_, err := Run(context.Background(), rec, Options{ResumeDir: runDir, Out: io.Discard, Progress: io.Discard})
	if err == nil || !strings.Contains(err.Error(), runDir+" is in use by process "+strconv.Itoa(pid)) {
		t.Fatalf("err = %v, want the run directory in use by process %d", err, pid)
	}
	// Without the holder the same call gets as far as the kind's run.
	stop()
	_, err = Run(context.Background(), rec, Options{ResumeDir: runDir, Out: io.Discard, Progress: io.Discard})
	if !errors.Is(err, errStubRan) {
		t.Fatalf("err = %v, want the kind to run", err)
	}
	// And Run released the lock when it returned.
	unlock, err := LockRunDir(runDir)
	if err != nil {
		t.Fatalf("lock after Run returned: %v", err)
	}
	unlock()
}

// TestUnwritableOutputDirFailsFirst: an output_dir that cannot hold run directories is the
// error before the data are read (data.dir does not exist here), naming the key, the recipe
// file and the OS error.
func TestUnwritableOutputDirFailsFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := configs.Defaults()
	rec.Kind = stubKind
	rec.Data.Dir = filepath.Join(dir, "no-such-data")
	rec.OutputDir = filepath.Join(file, "runs") // below a file: no directory can be made (even as root)
	_, err := Run(context.Background(), rec, Options{RecipePath: "recipes/r.toml", Out: io.Discard, Progress: io.Discard})
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"recipes/r.toml: output_dir:", rec.OutputDir, "not a directory"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	// A writable output_dir passes; the check leaves no file, and no directory it created.
	if err := CheckOutputDir(&configs.Recipe{Name: "x", OutputDir: filepath.Join(dir, "new", "runs")}, ""); err != nil {
		t.Errorf("a writable output_dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Error("the check left the directories it created")
	}
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutputDir(&configs.Recipe{Name: "x", OutputDir: existing}, ""); err != nil {
		t.Errorf("an existing output_dir: %v", err)
	}
	if entries, err := os.ReadDir(existing); err != nil || len(entries) != 0 {
		t.Errorf("the check left %v (%v) in an existing output_dir", entries, err)
	}
}

// TestRemoveIfUntrainedReaderLM: a reader_lm run failing before its first step (lora.rank =
// 10^9, refused when the adapters are built) holds the resolved recipe, an empty runs/ and its
// tokenizer/ directory (the Hugging Face copy of init_from's tokenizer): it is removed, not left
// looking resumable; a directory holding a checkpoint is kept.
func TestRemoveIfUntrainedReaderLM(t *testing.T) {
	mk := func(extra ...string) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ResolvedRecipeFile), []byte("kind = \"reader_lm\"\n"), 0o644)
		os.MkdirAll(filepath.Join(dir, RunsDir), 0o755)
		os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755)
		os.WriteFile(filepath.Join(dir, "tokenizer", "tokenizer.json"), []byte("{}"), 0o644)
		for _, e := range extra {
			os.MkdirAll(filepath.Join(dir, e), 0o755)
		}
		return dir
	}
	dir := mk()
	RemoveIfUntrained(dir)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("an untrained reader_lm run directory was left: %v", err)
	}
	dir = mk("checkpoint-reader_lm-80")
	RemoveIfUntrained(dir)
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a run directory with a checkpoint was removed: %v", err)
	}
}
