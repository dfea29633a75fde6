package experiment

import (
	"context"
	"fmt"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// runEnv is what every phase of a run shares: the recipe, the command-line options, the run
// directory, the seed, the tokenizer file its checkpoints copy and log.jsonl.
type runEnv struct {
	rec     *configs.Recipe
	o       Options
	dir     string
	seed    uint64
	tokPath string
	lg      *trainer.Log
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
	// up for train.warmup_steps, every other phase for shortWarmup(train.warmup_steps, Steps).
	Warmup int
	// CheckpointEvery saves every n steps (and at the end, and when interrupted); 0: only at the
	// end and when interrupted.
	CheckpointEvery int
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
}

// shortWarmup is the warm-up rule of every phase but a retriever's "train": train.warmup_steps,
// at most a tenth of the phase (plus one step).
func shortWarmup(warmup, steps int) int { return min(warmup, steps/10+1) }

// runPhase runs ph: a fresh AdamW (or the restored one when resuming), the schedule, the
// checkpoints (one save function for every kind) and the test interrupt hook. It prints one
// line when the phase ends and returns the loop's result and the phase's training seconds over
// every segment.
func (e *runEnv) runPhase(ctx context.Context, ph Phase) (trainer.Result, float64, error) {
	rec := e.rec
	task := ph.Task
	if e.o.interruptPhase == ph.Name {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		task = &interrupter{Task: task, at: e.o.interruptAt, cancel: cancel}
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
		dir = e.dir
	}
	res, err := trainer.Run(ctx, task, opt, trainer.Options{
		Phase: ph.Name, Steps: ph.Steps, StartStep: ph.Start,
		Schedule: trainer.Schedule{Peak: ph.LR, Warmup: ph.Warmup, Total: ph.Steps, Kind: rec.Train.Schedule},
		GradClip: rec.Train.GradClip, LogEvery: rec.Train.LogEvery, CheckpointEvery: ph.CheckpointEvery,
		Log: e.lg, Progress: e.o.Progress,
		Checkpoint: func(done int) error {
			if ph.EndOnly && done < ph.Steps {
				return nil
			}
			ts := checkpoints.TrainerState{Step: done, Phase: ph.Name, Seed: e.seed, TrainSeconds: ckSeconds()}
			if e.lg != nil {
				ts.LogBytes = e.lg.Size()
			}
			if ph.State != nil {
				ph.State(done, &ts)
			}
			var st *trainer.OptimizerState
			if !ph.NoOptimizer {
				s := opt.State()
				st = &s
			}
			return e.save(dir, ph.Params, ph.Config, st, ts)
		},
	})
	if err != nil {
		return res, 0, err
	}
	sec := seconds()
	fmt.Fprintf(e.o.Out, "%s: %d steps in %.1fs, loss %.4f -> %.4f\n", ph.Name, res.Steps, sec, res.FirstLoss, res.LastLoss)
	if tr, ok := ph.Task.(truncReporter); ok {
		L, parts := tr.truncation()
		reportTruncation(e.o.Out, ph.Name, L, parts...)
	}
	return res, sec, nil
}

// save writes a checkpoint of params (config.json: cfg, the run's tokenizer) into dir; the one
// place a run saves a checkpoint.
func (e *runEnv) save(dir string, params []*model.Param, cfg any, opt *trainer.OptimizerState, ts checkpoints.TrainerState) error {
	return checkpoints.Save(dir, &checkpoints.Checkpoint{
		Params: paramTensors(params), Config: cfg, TokenizerPath: e.tokPath, Optimizer: opt, Trainer: ts,
	})
}
