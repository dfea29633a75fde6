package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Env is what every phase of a run shares: the recipe, the command-line options, the run
// directory, the seed, the tokenizer file its checkpoints copy and log.jsonl.
type Env struct {
	Rec           *configs.Recipe
	Opts          Options
	Dir           string
	Seed          uint64
	TokenizerPath string
	Log           *trainer.Log
}

// Phase is one training phase, as every kind runs it: Task trained for Steps optimizer steps
// with AdamW (train.weight_decay) under a linear warm-up over Warmup steps to LR, then the
// train.schedule decay; checkpointed every CheckpointEvery steps, at its end and when
// interrupted; resumed at Start with Optimizer restored.
type Phase struct {
	Name  string // "pretrain", "train", "reader_lm", ...: log lines and checkpoint directories
	Steps int
	Task  trainer.Task
	LR    float64 // peak learning rate
	// Warmup is the number of warm-up steps. Kinds differ: a retriever's "train" phase warms
	// up for train.warmup_steps, every other phase for ShortWarmup(train.warmup_steps, Steps).
	Warmup int
	// CheckpointEvery saves every n steps (and at the end, and when interrupted); 0: only at the
	// end and when interrupted.
	CheckpointEvery int
	// EvalEvery, when > 0, runs Select every n steps (and at the last step) instead of at
	// CheckpointEvery's checkpoints, and saves a checkpoint there too (the resume point of each
	// evaluation); 0: Select runs at CheckpointEvery's checkpoints.
	EvalEvery int
	// EndOnly saves only the phase's last step (no mid-phase checkpoint, none when
	// interrupted): phases that cannot resume mid-way.
	EndOnly bool
	// Dir is where checkpoints go (the run directory when empty).
	Dir string
	// A checkpoint holds Params under Config (config.json).
	Params []*model.Param
	Config any
	// NoOptimizer leaves the optimizer state out of the checkpoints.
	NoOptimizer bool

	// The resume point: the first step to run and the optimizer state saved with it (restored
	// when Start > 0), and the phase's training seconds of earlier segments.
	Start         int
	Optimizer     *trainer.OptimizerState
	SecondsBefore float64
	// Seconds, when set, is the training time a checkpoint records (default: the phase's own,
	// SecondsBefore plus this segment's).
	Seconds func() float64
	// State, when set, adds kind-specific fields (e.g. the sampler's epoch) to the trainer
	// state of the checkpoint after done steps.
	State func(done int, ts *checkpoints.TrainerState)
	// Select, when set, runs at every regular checkpoint (every CheckpointEvery steps, or every
	// EvalEvery steps when set, and the last step; not when interrupted) before the checkpoint
	// is written: model selection on a dev split, which records its best value in ts
	// (BestMetric) so a resumed run continues from the same best. An error wrapping
	// trainer.ErrStop stops the phase early once the checkpoint is written (Result.StoppedAt).
	Select func(done int, ts *checkpoints.TrainerState) error
	// Tensors, when set, returns the task's own tensors to save in the checkpoint after done
	// steps (checkpoints.Checkpoint.State: e.g. a cache the task fills as it trains), which
	// the task restores when resumed.
	Tensors func(done int) []checkpoints.RawTensor
}

// Restore resumes ph from the latest checkpoint under dir: ph.Params take its tensors, and
// ph.Start, ph.Optimizer and ph.SecondsBefore its step, optimizer state and training seconds;
// it says where it resumed on out and returns the checkpoint's trainer state. An error names
// the checkpoint directory.
func (ph *Phase) Restore(dir string, out io.Writer) (checkpoints.TrainerState, error) {
	ck, err := checkpoints.Load(dir)
	if err != nil {
		return checkpoints.TrainerState{}, err
	}
	if err := SetParams(ph.Params, ck.Params); err != nil {
		return checkpoints.TrainerState{}, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
	fmt.Fprintf(out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
	return ck.Trainer, nil
}

// ShortWarmup is the warm-up rule of every phase but a retriever's "train": train.warmup_steps,
// at most a tenth of the phase (plus one step).
func ShortWarmup(warmup, steps int) int { return min(warmup, steps/10+1) }

// RunPhase runs ph: a fresh AdamW (or the restored one when resuming), the schedule, the
// checkpoints (one save function for every kind) and the test interrupt hook. It prints one
// line when the phase ends and returns the loop's result and the phase's training seconds over
// every segment.
func (e *Env) RunPhase(ctx context.Context, ph Phase) (trainer.Result, float64, error) {
	rec := e.Rec
	task := ph.Task
	if e.Opts.InterruptPhase == ph.Name {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		task = &interrupter{Task: task, at: e.Opts.InterruptAt, cancel: cancel}
	}
	opt := trainer.NewAdamW(rec.Train.WeightDecay)
	if ph.Optimizer != nil && ph.Start > 0 {
		if err := opt.SetState(*ph.Optimizer); err != nil {
			return trainer.Result{}, 0, err
		}
	}
	segment := time.Now()
	seconds := func() float64 { return ph.SecondsBefore + time.Since(segment).Seconds() }
	ckSeconds := seconds
	if ph.Seconds != nil {
		ckSeconds = ph.Seconds
	}
	dir := ph.Dir
	if dir == "" {
		dir = e.Dir
	}
	res, err := trainer.Run(ctx, task, opt, trainer.Options{
		Phase: ph.Name, Steps: ph.Steps, StartStep: ph.Start,
		Schedule: trainer.Schedule{Peak: ph.LR, Warmup: ph.Warmup, Total: ph.Steps, Kind: rec.Train.Schedule},
		GradClip: rec.Train.GradClip, LogEvery: rec.Train.LogEvery, CheckpointEvery: ph.CheckpointEvery, EvalEvery: ph.EvalEvery,
		Log: e.Log, Progress: e.Opts.Progress,
		Checkpoint: func(done int) error {
			if ph.EndOnly && done < ph.Steps {
				return nil
			}
			ts := checkpoints.TrainerState{Step: done, Phase: ph.Name, Seed: e.Seed, TrainSeconds: ckSeconds()}
			if e.Log != nil {
				ts.LogBytes = e.Log.Size()
			}
			if ph.State != nil {
				ph.State(done, &ts)
			}
			regular := (ph.CheckpointEvery > 0 && done%ph.CheckpointEvery == 0) || done == ph.Steps
			if ph.EvalEvery > 0 {
				regular = done%ph.EvalEvery == 0 || done == ph.Steps
			}
			var stop error // trainer.ErrStop from Select: saved first, then returned
			if ph.Select != nil && regular {
				if err := ph.Select(done, &ts); errors.Is(err, trainer.ErrStop) {
					stop = err
				} else if err != nil {
					return err
				}
			}
			ck := &checkpoints.Checkpoint{Params: ParamTensors(ph.Params), Config: ph.Config, Trainer: ts}
			if !ph.NoOptimizer {
				s := opt.State()
				ck.Optimizer = &s
			}
			if ph.Tensors != nil {
				ck.State = ph.Tensors(done)
			}
			if err := e.SaveCheckpoint(dir, ck); err != nil {
				return err
			}
			return stop
		},
	})
	if err != nil {
		return res, 0, err
	}
	sec := seconds()
	fmt.Fprintf(e.Opts.Out, "%s: %d steps in %.1fs, loss %.4f -> %.4f\n", ph.Name, res.Steps, sec, res.FirstLoss, res.LastLoss)
	if res.StoppedAt > 0 {
		fmt.Fprintf(e.Opts.Out, "%s: stopped early after step %d of %d\n", ph.Name, res.StoppedAt, ph.Steps)
	}
	if tr, ok := ph.Task.(tokenize.TruncReporter); ok {
		L, parts := tr.Truncation()
		tokenize.ReportTruncation(e.Opts.Out, ph.Name, L, parts...)
	}
	return res, sec, nil
}

// Save writes a checkpoint of params (config.json: cfg, the run's tokenizer) into dir
// (SaveCheckpoint).
func (e *Env) Save(dir string, params []*model.Param, cfg any, opt *trainer.OptimizerState, ts checkpoints.TrainerState) error {
	return e.SaveCheckpoint(dir, &checkpoints.Checkpoint{Params: ParamTensors(params), Config: cfg, Optimizer: opt, Trainer: ts})
}

// SaveCheckpoint writes ck, with the run's tokenizer, into dir; the one place a run saves a
// checkpoint.
func (e *Env) SaveCheckpoint(dir string, ck *checkpoints.Checkpoint) error {
	if len(ck.Tokenizer) == 0 {
		ck.TokenizerPath = e.TokenizerPath
	}
	return checkpoints.Save(dir, ck)
}

// SaveZeroStep writes checkpoint 0 of a run of no training step (train.steps = 0): the model it
// evaluates (params, its config.json cfg), so that train export and train search serve that
// run as any trained run's latest checkpoint. A run directory that already holds a checkpoint
// (a resumed run) is left as it is.
func (e *Env) SaveZeroStep(phase string, params []*model.Param, cfg any) error {
	if HasCheckpoint(e.Dir) {
		return nil
	}
	return e.Save(e.Dir, params, cfg, nil, checkpoints.TrainerState{Phase: phase, Seed: e.Seed})
}
