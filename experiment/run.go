package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Options are the command-line side of a run.
type Options struct {
	// ResumeDir continues the run in that directory from its latest checkpoint.
	ResumeDir string
	// RecipePath is the recipe file, for messages ("" names the recipe by its name).
	RecipePath string
	// Out receives messages and the results table; Progress the progress bars.
	Out, Progress io.Writer

	// Test-only hooks, for the tests of the kind packages and of cmd/train; a program leaves them
	// unset. InterruptPhase and InterruptAt stop the run as SIGINT would, when that phase reaches
	// that step (tests of resume).
	InterruptPhase string
	InterruptAt    int
	// OnEncode, when set, is called by every index-refresh worker before it encodes a shard
	// (tests that interrupt a run mid-refresh).
	OnEncode func()

	created *string // set by Run: the run directory PrepareRunDir created (RemoveIfUntrained)
}

// Run runs the recipe and returns its run directory.
func Run(ctx context.Context, rec *configs.Recipe, o Options) (dir string, err error) {
	run, err := lookupKind(rec.Kind)
	if err != nil {
		return "", err
	}
	release, err := beginRun(rec, o) // output_dir writable, the run directory locked
	if err != nil {
		return "", err
	}
	var created string
	o.created = &created
	defer func() {
		if err != nil && created != "" {
			RemoveIfUntrained(created) // a run failing before its first step leaves no directory
		}
		release(dir)
	}()
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	precision, err := model.ParsePrecision(rec.Train.Precision)
	if err != nil {
		return "", fmt.Errorf("train.precision: %w", err)
	}
	defer model.SetMatmulPrecision(model.SetMatmulPrecision(precision))
	if precision == model.BFloat16 {
		fmt.Fprintf(o.Out, "matrix products: bf16 inputs, float32 accumulation (%s)\n", model.BF16Kernel())
	}
	return run(ctx, rec, o)
}

// PrepareRunDir creates a new run directory, or checks the one to resume.
func PrepareRunDir(rec *configs.Recipe, o Options) (string, error) {
	if o.ResumeDir == "" {
		dir, err := NewRunDir(rec)
		if dir != "" && o.created != nil {
			*o.created = dir
		}
		return dir, err
	}
	if _, err := os.Stat(filepath.Join(o.ResumeDir, ResolvedRecipeFile)); err != nil {
		return "", fmt.Errorf("-resume %s: not a run directory: %w", o.ResumeDir, err)
	}
	return o.ResumeDir, nil
}

// PrepareTokenizer returns the run's tokenizer without writing anything: the tokenizer.json of
// resumeDir when resuming, else the recipe's file, the init_from directory's, or one trained
// on the passages.
func PrepareTokenizer(rec *configs.Recipe, resumeDir string, passages []string, out io.Writer) (*tokenize.Tokenizer, error) {
	return PrepareTokenizerSeq(rec, resumeDir, slices.Values(passages), out)
}

// PrepareTokenizerSeq is PrepareTokenizer over passages read once as a sequence (a streamed
// corpus): the same tokenizer.
func PrepareTokenizerSeq(rec *configs.Recipe, resumeDir string, passages iter.Seq[string], out io.Writer) (*tokenize.Tokenizer, error) {
	switch {
	case resumeDir != "":
		return tokenize.Load(filepath.Join(resumeDir, checkpoints.TokenizerFile))
	case rec.Tokenizer.File != "":
		return tokenize.Load(rec.Tokenizer.File)
	case rec.Model.InitFrom != "":
		return initFromTokenizer(rec.Model.InitFrom, out)
	}
	start := time.Now()
	t, err := tokenize.TrainSeq(passages, tokenize.TrainOptions{
		VocabSize: rec.Tokenizer.VocabSize, MinFrequency: rec.Tokenizer.MinFrequency, Lowercase: rec.Tokenizer.Lowercase})
	if err == nil {
		fmt.Fprintf(out, "tokenizer: trained WordPiece, %d tokens, in %.1fs\n", t.VocabSize(), time.Since(start).Seconds())
	}
	return t, err
}

// SaveTokenizer writes t as the run directory's tokenizer.json (unless resuming, when it is
// there already) and reloads it from there, so the run uses exactly what it ships.
func SaveTokenizer(t *tokenize.Tokenizer, dir string, resume bool) (*tokenize.Tokenizer, string, error) {
	path := filepath.Join(dir, checkpoints.TokenizerFile)
	if resume {
		return t, path, nil
	}
	if err := t.Save(path); err != nil {
		return nil, "", err
	}
	t, err := tokenize.Load(path)
	return t, path, err
}

// RunStages runs a kind's stages in order; the first error ends the run and is returned.
func RunStages(stages ...func() error) error {
	for _, stage := range stages {
		if err := stage(); err != nil {
			return err
		}
	}
	return nil
}

// OpenRunDir is the first thing a kind's run writes: it creates the run directory, or checks the
// one o.ResumeDir names (PrepareRunDir), and saves tok there as tokenizer.json (SaveTokenizer; a
// resumed run keeps its own). It returns the directory, the tokenizer as the run reads it back
// and the tokenizer file's path.
func OpenRunDir(rec *configs.Recipe, o Options, tok *tokenize.Tokenizer) (dir string, saved *tokenize.Tokenizer, tokPath string, err error) {
	if dir, err = PrepareRunDir(rec, o); err != nil {
		return "", nil, "", err
	}
	saved, tokPath, err = SaveTokenizer(tok, dir, o.ResumeDir != "")
	return dir, saved, tokPath, err
}

// Finished reports whether a run directory holds the metrics of a completed run.
func Finished(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, MetricsFile))
	return err == nil
}

// HasCheckpoint reports whether dir names a latest checkpoint.
func HasCheckpoint(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, checkpoints.LatestFile))
	return err == nil
}

// OpenRunLog opens the run's log.jsonl for appending. A resumed run first cuts it back to the
// length its latest checkpoint recorded (the longest among dir and the run's other checkpoint
// directories ckDirs), or to empty when it has no checkpoint yet, so that the lines of the
// steps it runs again appear once. A checkpoint that recorded no length (written before
// log_bytes existed) leaves the log as it is.
func OpenRunLog(dir string, resume bool, ckDirs ...string) (*trainer.Log, error) {
	path := filepath.Join(dir, LogFile)
	if !resume {
		return trainer.OpenLog(path)
	}
	found, size := false, int64(0)
	for _, d := range append([]string{dir}, ckDirs...) {
		if !HasCheckpoint(d) {
			continue
		}
		ck, err := checkpoints.Load(d)
		if err != nil {
			return nil, err
		}
		found, size = true, max(size, ck.Trainer.LogBytes)
	}
	if found && size == 0 {
		return trainer.OpenLog(path)
	}
	return trainer.OpenLogAt(path, size)
}

// ParamTensors copies a model's parameters into checkpoint tensors.
func ParamTensors(ps []*model.Param) []checkpoints.Tensor {
	var ts []checkpoints.Tensor
	for _, p := range ps {
		ts = append(ts, checkpoints.Tensor{Name: p.Name, Shape: append([]int(nil), p.Value.Shape()...),
			Data: append([]float32(nil), p.Value.Data().([]float32)...)})
	}
	return ts
}

// SetParams copies checkpoint tensors into a model's parameters ps, which must have exactly
// those names and shapes.
func SetParams(ps []*model.Param, ts []checkpoints.Tensor) error {
	byName := map[string]checkpoints.Tensor{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	var errs []error
	for _, p := range ps {
		t, ok := byName[p.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("missing tensor %s", p.Name))
			continue
		}
		delete(byName, p.Name)
		if !slices.Equal(t.Shape, []int(p.Value.Shape())) {
			errs = append(errs, fmt.Errorf("tensor %s has shape %v, the model wants %v", p.Name, t.Shape, p.Value.Shape()))
			continue
		}
		copy(p.Value.Data().([]float32), t.Data)
	}
	for name := range byName {
		errs = append(errs, fmt.Errorf("unexpected tensor %s", name))
	}
	return errors.Join(errs...)
}

// interrupter cancels the run's context when the wrapped task reaches step at.
type interrupter struct {
	trainer.Task
	at     int
	cancel context.CancelFunc
}

func (t *interrupter) Step(step int) (float64, int, error) {
	if step == t.at {
		t.cancel()
	}
	return t.Task.Step(step)
}
