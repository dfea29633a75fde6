package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Task is what a recipe kind gives the loop: one forward/backward pass per step, and its
// parameters with their gradients.
type Task interface {
	// Step runs the forward and backward pass of step (0-based within the phase) and returns
	// the mean loss of the batch and the number of training examples it held.
	Step(step int) (loss float64, examples int, err error)
	// Params returns the trainable parameters, with the gradients of the last Step.
	Params() []Param
	// AfterUpdate is called once the optimizer has updated the parameters.
	AfterUpdate()
}

// Options configure one training phase.
type Options struct {
	Phase           string // "pretrain", "train", ...: written to every log line
	Steps           int    // total steps of the phase
	StartStep       int    // first step to run (> 0 when resuming)
	Schedule        Schedule
	GradClip        float64 // max global gradient norm; <= 0 disables clipping
	LogEvery        int     // log every n steps (and the last step)
	CheckpointEvery int     // call Checkpoint every n steps (and after the last step); 0: only at the end
	// EvalEvery also calls Checkpoint every n steps, where the phase evaluates the model (a
	// resume point at every evaluation); 0: none beyond CheckpointEvery's.
	EvalEvery int
	Log       *Log // may be nil
	Progress  io.Writer
	// Checkpoint is called with the number of completed steps; nil to skip. An error wrapping
	// ErrStop ends the phase after those steps without an error (early stopping).
	Checkpoint func(done int) error
}

// Result summarises a phase.
type Result struct {
	Steps, Examples int
	Seconds         float64
	FirstLoss       float64 // mean loss over the first LogEvery steps run
	LastLoss        float64 // mean loss over the last LogEvery steps run
	// StoppedAt is the completed steps when Checkpoint stopped the phase early (ErrStop); 0
	// when it ran to Steps.
	StoppedAt int
}

// ErrInterrupted is returned when the context is cancelled; a checkpoint of the completed
// steps has been written first (when Checkpoint is set).
var ErrInterrupted = errors.New("training interrupted")

// ErrStop, returned (or wrapped) by Options.Checkpoint, ends the phase after the steps it was
// called with, as if they were the last: early stopping. Run then returns no error and sets
// Result.StoppedAt.
var ErrStop = errors.New("stop training")

// Run trains task with opt for the steps [o.StartStep, o.Steps).
func Run(ctx context.Context, task Task, opt *AdamW, o Options) (Result, error) {
	if o.LogEvery <= 0 {
		o.LogEvery = 50
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	// On a terminal the bar redraws 5 times a second; in a log file every 10 s.
	throttle := 10 * time.Second
	if f, ok := o.Progress.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		throttle = 200 * time.Millisecond
	}
	bar := progressbar.NewOptions(o.Steps,
		progressbar.OptionSetWriter(o.Progress),
		progressbar.OptionSetDescription(o.Phase),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(throttle),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(o.Progress) }),
	)
	_ = bar.Set(o.StartStep)
	var res Result
	start := time.Now()
	winStart, winLoss, winN, winEx := time.Now(), 0.0, 0, 0
	if o.StartStep > 0 { // resumed: the log window the checkpoint's optimizer state recorded
		winLoss, winN, winEx = opt.window.Loss, opt.window.Steps, opt.window.Examples
	}
	keepWindow := func() { opt.window = LogWindow{Loss: winLoss, Steps: winN, Examples: winEx} }
	first := true
	lastSaved := o.StartStep
	for step := o.StartStep; step < o.Steps; step++ {
		if err := ctx.Err(); err != nil {
			fmt.Fprintln(o.Progress)
			keepWindow()
			if o.Checkpoint != nil && step > lastSaved {
				if cerr := o.Checkpoint(step); cerr != nil {
					return res, fmt.Errorf("%w at step %d; checkpoint failed: %v", ErrInterrupted, step, cerr)
				}
			}
			return res, fmt.Errorf("%w at step %d of %s", ErrInterrupted, step, o.Phase)
		}
		loss, n, err := task.Step(step)
		if err != nil {
			return res, fmt.Errorf("%s step %d: %w", o.Phase, step, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("%s step %d: loss is %v (lower the learning rate or check the inputs)", o.Phase, step, loss)
		}
		params := task.Params()
		norm := ClipGlobalNorm(params, o.GradClip)
		lr := o.Schedule.LR(step)
		opt.Step(params, lr)
		task.AfterUpdate()

		res.Steps++
		res.Examples += n
		winLoss += loss
		winN++
		winEx += n
		done := step + 1
		// Log lines fall on multiples of LogEvery, so a resumed run logs the same steps.
		if done%o.LogEvery == 0 || done == o.Steps {
			el := time.Since(winStart).Seconds()
			mean := winLoss / float64(winN)
			if first {
				res.FirstLoss, first = mean, false
			}
			res.LastLoss = mean
			eps := float64(winEx) / math.Max(el, 1e-9)
			bar.Describe(fmt.Sprintf("%s loss %.4f lr %.2e %.0f ex/s", o.Phase, mean, lr, eps))
			if o.Log != nil {
				if err := o.Log.Write(map[string]any{
					"phase": o.Phase, "step": done, "loss": mean, "lr": lr, "grad_norm": norm,
					"examples_per_second": eps, "elapsed_seconds": time.Since(start).Seconds(),
				}); err != nil {
					return res, err
				}
			}
			winStart, winLoss, winN, winEx = time.Now(), 0, 0, 0
		}
		_ = bar.Add(1)
		if o.Checkpoint != nil && ((o.CheckpointEvery > 0 && done%o.CheckpointEvery == 0) || (o.EvalEvery > 0 && done%o.EvalEvery == 0) || done == o.Steps) {
			keepWindow()
			err := o.Checkpoint(done)
			if errors.Is(err, ErrStop) && done < o.Steps {
				res.StoppedAt = done
				break
			}
			if err != nil && !errors.Is(err, ErrStop) {
				return res, fmt.Errorf("%s step %d: checkpoint: %w", o.Phase, done, err)
			}
			lastSaved = done
		}
	}
	_ = bar.Finish()
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// Log appends one JSON object per line to a file (log.jsonl in the run directory). Each line is
// written with a single write call, so a crash never leaves half a line behind an earlier one.
// Size is the file's length so far: a checkpoint records it (checkpoints.TrainerState.LogBytes)
// and a resumed run reopens the log there (OpenLogAt), so the replayed steps are not logged twice.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	size int64
}

// OpenLog opens path for appending, creating it if needed.
func OpenLog(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Log{f: f, size: fi.Size()}, nil
}

// OpenLogAt opens path for appending after cutting it to its first size bytes: what was logged
// after a checkpoint that recorded Size() = size is dropped, since the resumed run logs it
// again. A size beyond the file's length is refused (the log is not the checkpoint's).
func OpenLogAt(path string, size int64) (*Log, error) {
	if size < 0 {
		return nil, fmt.Errorf("%s: cannot reopen the log at byte %d", path, size)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && size > fi.Size() {
		err = fmt.Errorf("%s holds %d bytes, fewer than the %d the checkpoint recorded (not this run's log?)", path, fi.Size(), size)
	}
	if err == nil {
		err = f.Truncate(size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Log{f: f, size: size}, nil
}

// Size returns the bytes written to the file so far, its length.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Write appends v as one JSON line.
func (l *Log) Write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.f.Write(append(b, '\n'))
	l.size += int64(n)
	return err
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }
