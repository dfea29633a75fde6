package trainer

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logLosses runs quadratic steps [start, 30) logging every 5 steps and returns the logged
// losses by step.
func logLosses(t *testing.T, q *quadratic, opt *AdamW, start, stopAt int, saved *OptimizerState) map[int]float64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.jsonl")
	lg, err := OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var task Task = q
	if stopAt > 0 {
		task = &cancelAt{quadratic: q, at: stopAt, cancel: cancel}
	}
	o := Options{Phase: "train", Steps: 30, StartStep: start, LogEvery: 5, Log: lg, Progress: io.Discard,
		Schedule: Schedule{Peak: 0.05, Total: 30}, CheckpointEvery: 100,
		Checkpoint: func(done int) error { *saved = opt.State(); return nil }}
	Run(ctx, task, opt, o)
	lg.Close()
	b, _ := os.ReadFile(path)
	out := map[int]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Step int
			Loss float64
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		out[l.Step] = l.Loss
	}
	return out
}

// TestResumedLogWindow: issue 37's log.jsonl after a resume from a step that is not a multiple
// of log_every averaged the first window over the steps run since the resume only (2.709
// against 2.551 at step 30). The window now travels with the optimizer state, and every logged
// loss of the resumed run equals the uninterrupted run's, bit for bit.
func TestResumedLogWindow(t *testing.T) {
	var unused OptimizerState
	full := logLosses(t, newQuadratic(), NewAdamW(0), 0, 0, &unused)
	var saved OptimizerState
	q := newQuadratic()
	logLosses(t, q, NewAdamW(0), 0, 17, &saved) // cancelled in step 17: steps 0..17 done
	if saved.Step != 18 || saved.Window.Steps != 3 {
		t.Fatalf("saved at optimizer step %d with a window of %d steps, want 18 and 3", saved.Step, saved.Window.Steps)
	}
	opt := NewAdamW(0)
	if err := opt.SetState(saved); err != nil {
		t.Fatal(err)
	}
	resumed := logLosses(t, &quadratic{w: append([]float32(nil), q.w...), g: make([]float32, 3)}, opt, 18, 0, &unused)
	for _, step := range []int{20, 25, 30} {
		if resumed[step] != full[step] {
			t.Errorf("step %d: resumed loss %v, uninterrupted %v", step, resumed[step], full[step])
		}
	}
}
