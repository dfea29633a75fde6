package trainer

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdamWFirstStepIsSignTimesLR(t *testing.T) {
	// With zero moments, the bias-corrected first update is lr * g/(|g| + eps) = lr*sign(g),
	// plus decoupled decay lr*λ*θ on weights only.
	o := NewAdamW(0.1)
	w := []float32{1, -2}
	b := []float32{1, -2}
	o.Step([]Param{{Name: "w.weight", Value: w, Grad: []float32{0.5, -3}},
		{Name: "w.bias", Value: b, Grad: []float32{0.5, -3}}}, 0.01)
	want := []float64{1*(1-0.001) - 0.01, -2*(1-0.001) + 0.01}
	for i := range w {
		if math.Abs(float64(w[i])-want[i]) > 1e-6 {
			t.Errorf("weight[%d] = %v, want %v", i, w[i], want[i])
		}
	}
	wantB := []float64{1 - 0.01, -2 + 0.01}
	for i := range b {
		if math.Abs(float64(b[i])-wantB[i]) > 1e-6 {
			t.Errorf("bias[%d] = %v, want %v (no decay on biases)", i, b[i], wantB[i])
		}
	}
}

func TestAdamWSecondStep(t *testing.T) {
	// Hand computation for one scalar, g1 = 1, g2 = 2, lr = 0.1, no decay.
	o := NewAdamW(0)
	w := []float32{0}
	o.Step([]Param{{Name: "x", Value: w, Grad: []float32{1}}}, 0.1)
	o.Step([]Param{{Name: "x", Value: w, Grad: []float32{2}}}, 0.1)
	m := 0.9*0.1 + 0.1*2
	v := 0.999*0.001 + 0.001*4
	mh, vh := m/(1-0.81), v/(1-0.999*0.999)
	want := -0.1 - 0.1*mh/(math.Sqrt(vh)+1e-8)
	if math.Abs(float64(w[0])-want) > 1e-5 { // float32 arithmetic
		t.Fatalf("w = %v, want %v", w[0], want)
	}
}

// TestAdamWLRScale: a parameter with LRScale s steps as if the learning rate were s*lr (its
// decoupled decay too); LRScale 0 and 1 give the same bits as each other.
func TestAdamWLRScale(t *testing.T) {
	o := NewAdamW(0.1)
	w, w1, w0 := []float32{1, -2}, []float32{1, -2}, []float32{1, -2}
	g := []float32{0.5, -3}
	o.Step([]Param{{Name: "a.weight", Value: w, Grad: g, LRScale: 0.1},
		{Name: "b.weight", Value: w1, Grad: g, LRScale: 1}, {Name: "c.weight", Value: w0, Grad: g}}, 0.01)
	want := []float64{1*(1-0.0001) - 0.001, -2*(1-0.0001) + 0.001}
	for i := range w {
		if math.Abs(float64(w[i])-want[i]) > 1e-6 {
			t.Errorf("weight[%d] = %v, want %v", i, w[i], want[i])
		}
		if w1[i] != w0[i] {
			t.Errorf("LRScale 1 gives %v, LRScale 0 %v", w1[i], w0[i])
		}
	}
}

// TestClipGroups: a group's gradient is clipped by its own norm; the norm returned covers all.
func TestClipGroups(t *testing.T) {
	ps := []Param{{Grad: []float32{3, 0}}, {Grad: []float32{4}}, {Grad: []float32{0, 30}, ClipGroup: "passage"}}
	if n := ClipGlobalNorm(ps, 10); math.Abs(n-math.Sqrt(25+900)) > 1e-9 {
		t.Fatalf("norm %v, want sqrt(925)", n)
	}
	if ps[0].Grad[0] != 3 || ps[1].Grad[0] != 4 || ps[2].Grad[1] != 10 {
		t.Fatalf("grads %v %v %v: want the main group kept (norm 5 < 10), the passage group clipped to 10", ps[0].Grad, ps[1].Grad, ps[2].Grad)
	}
}

func TestClipGlobalNorm(t *testing.T) {
	ps := []Param{{Grad: []float32{3, 0}}, {Grad: []float32{4}}}
	if n := ClipGlobalNorm(ps, 1); math.Abs(n-5) > 1e-9 {
		t.Fatalf("norm %v, want 5", n)
	}
	if ps[0].Grad[0] != 0.6 || ps[1].Grad[0] != 0.8 {
		t.Fatalf("clipped grads %v %v, want 0.6 0.8", ps[0].Grad, ps[1].Grad)
	}
	if n := ClipGlobalNorm(ps, 10); math.Abs(n-1) > 1e-6 || ps[1].Grad[0] != 0.8 {
		t.Fatalf("below the bound the gradients must not change")
	}
}

func TestSchedule(t *testing.T) {
	cases := []struct {
		s    Schedule
		step int
		want float64
	}{
		{Schedule{1, 10, 110, "linear"}, 0, 0.1},
		{Schedule{1, 10, 110, "linear"}, 9, 1},
		{Schedule{1, 10, 110, "linear"}, 60, 0.5},
		{Schedule{1, 10, 110, "linear"}, 110, 0},
		{Schedule{1, 10, 110, "cosine"}, 60, 0.5},
		{Schedule{1, 10, 110, "cosine"}, 35, 0.5 * (1 + math.Cos(math.Pi/4))},
		{Schedule{2, 0, 100, "constant"}, 99, 2},
	}
	for _, c := range cases {
		if got := c.s.LR(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v step %d: lr %v, want %v", c.s, c.step, got, c.want)
		}
	}
}

// quadratic is a Task minimising ½‖w - target‖² with a step-dependent target jitter, so the
// sequence of updates depends on the step number (as a sampler's batches do).
type quadratic struct {
	w, g []float32
}

func (q *quadratic) Step(step int) (float64, int, error) {
	var loss float64
	for i := range q.w {
		target := float32(i+1) + float32(step%3)*0.01
		d := q.w[i] - target
		q.g[i] = d
		loss += 0.5 * float64(d*d)
	}
	return loss, 4, nil
}
func (q *quadratic) Params() []Param { return []Param{{Name: "w", Value: q.w, Grad: q.g}} }
func (q *quadratic) AfterUpdate()    {}

func newQuadratic() *quadratic { return &quadratic{w: make([]float32, 3), g: make([]float32, 3)} }

func TestRunLowersLossAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	lg, err := OpenLog(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var saved []int
	q := newQuadratic()
	res, err := Run(context.Background(), q, NewAdamW(0), Options{
		Phase: "train", Steps: 200, Schedule: Schedule{Peak: 0.1, Warmup: 10, Total: 200, Kind: "linear"},
		LogEvery: 20, CheckpointEvery: 50, Log: lg, Progress: io.Discard,
		Checkpoint: func(done int) error { saved = append(saved, done); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	lg.Close()
	if !(res.LastLoss < res.FirstLoss/10) {
		t.Fatalf("loss did not fall: first %v last %v", res.FirstLoss, res.LastLoss)
	}
	if got := len(saved); got != 4 || saved[3] != 200 {
		t.Fatalf("checkpoints at %v, want 50 100 150 200", saved)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "log.jsonl"))
	if n := strings.Count(string(b), "\n"); n != 10 {
		t.Fatalf("log has %d lines, want 10", n)
	}
}

func TestResumeIsExact(t *testing.T) {
	opts := func(start int) Options {
		return Options{Phase: "train", Steps: 40, StartStep: start, Progress: io.Discard,
			Schedule: Schedule{Peak: 0.05, Warmup: 5, Total: 40, Kind: "cosine"}, GradClip: 1}
	}
	full := newQuadratic()
	if _, err := Run(context.Background(), full, NewAdamW(0.01), opts(0)); err != nil {
		t.Fatal(err)
	}
	// Interrupt after 17 steps, keep the state, restore into a fresh optimizer and continue.
	part := newQuadratic()
	opt := NewAdamW(0.01)
	o := opts(0)
	o.Steps = 17
	if _, err := Run(context.Background(), part, opt, o); err != nil {
		t.Fatal(err)
	}
	opt2 := NewAdamW(0.01)
	if err := opt2.SetState(opt.State()); err != nil {
		t.Fatal(err)
	}
	resumed := &quadratic{w: append([]float32(nil), part.w...), g: make([]float32, 3)}
	if _, err := Run(context.Background(), resumed, opt2, opts(17)); err != nil {
		t.Fatal(err)
	}
	for i := range full.w {
		if full.w[i] != resumed.w[i] {
			t.Fatalf("resumed w[%d] = %v, uninterrupted %v", i, resumed.w[i], full.w[i])
		}
	}
}

func TestCancelCheckpointsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	q := newQuadratic()
	var saved []int
	steps := 0
	task := &cancelAt{quadratic: q, at: 7, cancel: cancel, steps: &steps}
	_, err := Run(ctx, task, NewAdamW(0), Options{Phase: "train", Steps: 100, Progress: io.Discard,
		Schedule:   Schedule{Peak: 0.1, Total: 100},
		Checkpoint: func(done int) error { saved = append(saved, done); return nil }})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err = %v, want interrupted", err)
	}
	if len(saved) != 1 || saved[0] != 8 {
		t.Fatalf("checkpoint at %v, want [8]", saved)
	}
}

type cancelAt struct {
	*quadratic
	at     int
	cancel func()
	steps  *int
}

func (c *cancelAt) Step(step int) (float64, int, error) {
	if step == c.at {
		c.cancel()
	}
	return c.quadratic.Step(step)
}

func TestCancelRightAfterACheckpointDoesNotSaveTwice(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	task := &cancelAt{quadratic: newQuadratic(), at: 7, cancel: cancel, steps: &steps}
	var saved []int
	_, err := Run(ctx, task, NewAdamW(0), Options{Phase: "train", Steps: 100, Progress: io.Discard, CheckpointEvery: 4,
		Schedule:   Schedule{Peak: 0.1, Total: 100},
		Checkpoint: func(done int) error { saved = append(saved, done); return nil }})
	if err == nil {
		t.Fatal("want interrupted")
	}
	if len(saved) != 2 || saved[0] != 4 || saved[1] != 8 {
		t.Fatalf("checkpoints at %v, want [4 8]", saved)
	}
}

func TestResumedRunLogsTheSameSteps(t *testing.T) {
	dir := t.TempDir()
	lg, err := OpenLog(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Phase: "train", Steps: 30, StartStep: 17, LogEvery: 5, Log: lg, Progress: io.Discard,
		Schedule: Schedule{Peak: 0.1, Total: 30}}
	if _, err := Run(context.Background(), newQuadratic(), NewAdamW(0), o); err != nil {
		t.Fatal(err)
	}
	lg.Close()
	b, _ := os.ReadFile(filepath.Join(dir, "log.jsonl"))
	var steps []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_, rest, _ := strings.Cut(line, `"step":`)
		n, _, _ := strings.Cut(rest, ",")
		steps = append(steps, strings.TrimRight(n, "}"))
	}
	if got := strings.Join(steps, " "); got != "20 25 30" {
		t.Fatalf("logged steps %q, want \"20 25 30\"", got)
	}
}

// TestEvalEveryAndErrStop: Checkpoint is called at the multiples of both CheckpointEvery and
// EvalEvery (and the last step); an error wrapping ErrStop ends the phase after that step with
// no error, and a stop on the last step is no early stop.
func TestEvalEveryAndErrStop(t *testing.T) {
	run := func(stopAt int) ([]int, Result, error) {
		var saved []int
		res, err := Run(context.Background(), newQuadratic(), NewAdamW(0), Options{Phase: "train", Steps: 100, Progress: io.Discard,
			CheckpointEvery: 50, EvalEvery: 20, Schedule: Schedule{Peak: 0.1, Total: 100},
			Checkpoint: func(done int) error {
				saved = append(saved, done)
				if done == stopAt {
					return fmt.Errorf("select: no gain: %w", ErrStop)
				}
				return nil
			}})
		return saved, res, err
	}
	saved, res, err := run(-1)
	if err != nil || fmt.Sprint(saved) != "[20 40 50 60 80 100]" || res.StoppedAt != 0 || res.Steps != 100 {
		t.Fatalf("no stop: checkpoints %v, StoppedAt %d, steps %d, err %v; want [20 40 50 60 80 100], 0, 100, nil", saved, res.StoppedAt, res.Steps, err)
	}
	saved, res, err = run(60)
	if err != nil || fmt.Sprint(saved) != "[20 40 50 60]" || res.StoppedAt != 60 || res.Steps != 60 {
		t.Fatalf("stop at 60: checkpoints %v, StoppedAt %d, steps %d, err %v; want [20 40 50 60], 60, 60, nil", saved, res.StoppedAt, res.Steps, err)
	}
	saved, res, err = run(100)
	if err != nil || len(saved) != 6 || res.StoppedAt != 0 || res.Steps != 100 {
		t.Fatalf("stop at the last step: checkpoints %v, StoppedAt %d, steps %d, err %v", saved, res.StoppedAt, res.Steps, err)
	}
}
