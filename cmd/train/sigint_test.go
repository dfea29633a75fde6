//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/experiment"
)

// childEnv makes the test binary run main() instead of the tests (TestMain), so that a test can
// start the command as a real process and signal it.
const childEnv = "RAGTRAIN_TRAIN_TEST_CHILD"

// slowEncodeEnv makes such a child sleep before every shard an index refresh encodes, so that a
// refresh spans most of a step even on a loaded machine and a signal sent as one starts lands
// while it encodes.
const slowEncodeEnv = "RAGTRAIN_TRAIN_TEST_SLOW_ENCODE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if os.Getenv(slowEncodeEnv) == "1" {
			optionsHook = func(o *experiment.Options) { o.OnEncode = func() { time.Sleep(50 * time.Millisecond) } }
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refreshLine is a refresh event of log.jsonl.
type refreshLine struct {
	Phase   string `json:"phase"`
	Step    int    `json:"step"`
	Refresh string `json:"refresh"`
	Error   string `json:"error"`
}

// readRefreshes returns the refresh events of a run's log.jsonl so far.
func readRefreshes(path string) []refreshLine {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []refreshLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l refreshLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Refresh != "" {
			out = append(out, l)
		}
	}
	return out
}

// TestSIGINTDuringRefreshThenResume starts `train -recipe` as a process, sends it SIGINT as a
// REALM sync refresh starts, and checks that it ends promptly with the interruption named, the
// refresh cancelled (logged as failed, never swapped in), the latest checkpoint intact at the
// completed step, and that `train -resume` finishes the run from it.
func TestSIGINTDuringRefreshThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	dir := t.TempDir()
	recipe := filepath.Join(dir, "realm.toml")
	if err := os.WriteFile(recipe, []byte(testRecipe(t, "sigint-realm")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-recipe", recipe)
	cmd.Env = append(os.Environ(), childEnv+"=1", slowEncodeEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait for the third refresh of the REALM phase to start, then interrupt.
	var runDir string
	deadline := time.After(3 * time.Minute)
wait:
	for {
		select {
		case err := <-exited:
			t.Fatalf("train ended before the REALM phase refreshed: %v\n%s\n%s", err, stdout.String(), stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no REALM refresh within 3 minutes\n%s", stderr.String())
		case <-time.After(time.Millisecond):
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "runs", "*", experiment.LogFile))
		if len(logs) == 0 {
			continue
		}
		started := 0
		for _, l := range readRefreshes(logs[0]) {
			if l.Phase == "realm_sync" && l.Refresh == "started" {
				started++
			}
		}
		if started >= 3 {
			runDir = filepath.Dir(logs[0])
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			break wait
		}
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("train still running 30 s after SIGINT\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("interrupted train: %v, want exit status 1\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "training interrupted") || !strings.Contains(stderr.String(), "run directory: "+runDir) {
		t.Errorf("stderr does not name the interruption and the run directory:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(runDir, experiment.MetricsFile)); err == nil {
		t.Error("an interrupted run wrote metrics.json")
	}

	// The refresh under way was cut short by the signal, not swapped in: the last refresh event is
	// its failure.
	refs := readRefreshes(filepath.Join(runDir, experiment.LogFile))
	last := refs[len(refs)-1]
	if last.Phase != "realm_sync" || last.Refresh != "failed" || !strings.Contains(last.Error, "stopped after") || !strings.Contains(last.Error, "interrupt signal received") {
		t.Errorf("last refresh event %+v, want a realm_sync refresh stopped by the interrupt signal", last)
	}
	ck, err := checkpoints.Load(runDir)
	if err != nil {
		t.Fatalf("latest checkpoint after SIGINT: %v", err)
	}
	if ck.Trainer.Phase != "realm_sync" || ck.Trainer.Step < 2 || ck.Trainer.Step >= 40 || ck.Optimizer == nil {
		t.Errorf("latest checkpoint: %s step %d (optimizer %t), want realm_sync mid-run with the optimizer", ck.Trainer.Phase, ck.Trainer.Step, ck.Optimizer != nil)
	}

	// -resume finishes the run from that checkpoint.
	if err := run([]string{"-resume", runDir}); err != nil {
		t.Fatalf("train -resume: %v", err)
	}
	m, err := experiment.ReadMetrics(runDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["dense+realm_sync/Recall@1"]; !ok {
		t.Errorf("resumed run's metrics.json lacks dense+realm_sync/Recall@1: %v", m)
	}
	if ck, err := checkpoints.Load(runDir); err != nil || ck.Trainer.Phase != "realm_sync" || ck.Trainer.Step != 40 {
		t.Errorf("after -resume the latest checkpoint is %+v (%v), want realm_sync step 40", ck.Trainer, err)
	}
}
