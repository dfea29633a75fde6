package experiment

import (
	"fmt"
	"io"

	"github.com/ragtrain/ragtrain/checkpoints"
)

// ResumeAt puts the latest checkpoint of dir into ph (its parameters into ph.Params, the step,
// optimizer state and training seconds into Start, Optimizer and SecondsBefore) and says so on
// out; nothing when dir has no checkpoint.
func ResumeAt(dir string, ph *Phase, out io.Writer) error {
	if !HasCheckpoint(dir) {
		return nil
	}
	ck, err := checkpoints.Load(dir)
	if err != nil {
		return err
	}
	if err := SetParams(ph.Params, ck.Params); err != nil {
		return fmt.Errorf("%s: %w", ck.Dir, err)
	}
	ph.Start, ph.Optimizer, ph.SecondsBefore = ck.Trainer.Step, ck.Optimizer, ck.Trainer.TrainSeconds
	fmt.Fprintf(out, "resume: %s at step %d\n", ck.Dir, ck.Trainer.Step)
	return nil
}
