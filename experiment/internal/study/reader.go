package study

import (
	"context"
	"io"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/experiment"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/trainer"
)

// The study harness of the reader-supervised objectives (Atlas' four, package atlas; RePlug,
// package replug): the retriever trains, with no passage label, towards a frozen reader's
// scores of each question's K candidates. An objective supplies its teacher and its loss over
// the retrieval logits (ragjoint.ReaderRetrieval) and its phase's settings (ReaderTraining); the
// harness runs the rest: the live index of a two-tower system, the phase, its training row and
// the system's evaluation.

// ReaderTraining is one system phase of a reader-supervised objective.
type ReaderTraining struct {
	Phase         string // the system phase (checkpoints, metrics, TREC)
	Steps         int
	LR            float64 // peak AdamW learning rate
	Start         int     // the step the phase resumes at (0: afresh)
	Optimizer     *checkpoints.OptimizerState
	SecondsBefore float64 // training seconds of the phase before the resume
	// Both trains the passage tower too: the index goes stale, so a LiveIndex refreshed by
	// [index_refresh] serves the candidates, retrieved by Retrieve(li).
	Both     bool
	Retrieve func(li *LiveIndex) ragjoint.RetrieveFunc
	// ragjoint.NewTask builds the phase's task; retrieve is nil unless Both.
	NewTask func(retrieve ragjoint.RetrieveFunc) (TeacherTask, error)
}

// TeacherTask is the training task of a reader-supervised objective.
type TeacherTask interface {
	trainer.Task
	Close()
}

// StatefulTeacherTask is a TeacherTask that keeps state across steps in its checkpoints (RePlug's
// cache of the reader's scores): the harness restores it when the phase resumes, saves it with
// every checkpoint (instead of the live index's state) and adds Extra's counters to the
// phase's training row.
type StatefulTeacherTask interface {
	TeacherTask
	Restore(ck *checkpoints.Checkpoint) error
	State(done int, ts *checkpoints.TrainerState)
	Tensors(done int) []checkpoints.RawTensor
	// Extra returns the task's counters as metrics and reports them on out.
	Extra(phase string, out io.Writer) map[string]float64
}

// TrainFromReader runs one system phase of a reader-supervised objective, records its
// training row and evaluates the system.
func (s *Study) TrainFromReader(ctx context.Context, rt ReaderTraining) error {
	var li *LiveIndex
	var retrieve ragjoint.RetrieveFunc
	if rt.Both {
		mode, err := indexrefresh.ParseMode(s.Rec.IndexRefresh.Mode)
		if err != nil {
			return err
		}
		if li, err = s.NewLiveIndex(ctx, rt.Phase, mode, rt.Start); err != nil {
			return err
		}
		defer li.Close()
		retrieve = rt.Retrieve(li)
	}
	task, err := rt.NewTask(retrieve)
	if err != nil {
		return err
	}
	defer task.Close()
	ph := experiment.Phase{Name: rt.Phase, Steps: rt.Steps, Task: task, LR: rt.LR, Start: rt.Start, Optimizer: rt.Optimizer, SecondsBefore: rt.SecondsBefore}
	st, stateful := task.(StatefulTeacherTask)
	switch {
	case stateful:
		// The task's state is checkpointed with the steps: a resumed phase continues from it
		// as the uninterrupted one does.
		if ck := s.Resuming(rt.Phase); ck != nil {
			if err := st.Restore(ck); err != nil {
				return err
			}
		}
		ph.State, ph.Tensors = st.State, st.Tensors
	case li != nil:
		ph.State, ph.Tensors = li.State, li.Tensors
	}
	sec, err := s.RunSystemPhase(ctx, ph)
	if err != nil {
		return err
	}
	extra := map[string]float64{}
	if stateful {
		extra = st.Extra(rt.Phase, s.Opts.Out)
	}
	if li != nil {
		for k, v := range li.Close() {
			extra[k] = v
		}
	}
	s.AddTrainRow(rt.Phase, sec, extra)
	return s.EvaluateSystem(rt.Phase)
}
