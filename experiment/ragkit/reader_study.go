package ragkit

import (
	"context"
	"fmt"
	"io"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/experiment"
	indexrefresh "github.com/ragtrain/ragtrain/index_refresh"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// The study harness of the reader-supervised objectives (Atlas' four, package atlas; RePlug,
// package replug): the retriever trains, with no passage label, towards a frozen reader's
// scores of each question's K candidates. An objective supplies its teacher and its loss over
// the retrieval logits (ReaderRetrieval) and its phase's settings (ReaderTraining); the
// harness runs the rest: the live index of a two-tower system, the phase, its training row and
// the system's evaluation.

// RetrieveFunc returns each question's candidate rows of the index at step, given the query
// vectors qv [len(texts)*dim] and the query texts (JointBatch.Retrieve).
type RetrieveFunc = func(step int, qv []float32, texts []string) ([][]int, error)

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
	Retrieve func(li *LiveIndex) RetrieveFunc
	// NewTask builds the phase's task; retrieve is nil unless Both.
	NewTask func(retrieve RetrieveFunc) (TeacherTask, error)
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
	var retrieve RetrieveFunc
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

// ReaderRetrieval is the retriever's side of a reader-supervised task: JointBatch draws B
// questions and their K candidates, and the graph built by Logits scores them, s [B,K] =
// sim(q, d) / tau (losses.RetrievalLogits, tau = loss.temperature), with the query tower over
// the questions and, per candidate, its index vector (query tower only: the index stays exact)
// or the passage tower over its text (both towers). Both towers run without dropout, so the
// scores match the index's.
type ReaderRetrieval struct {
	JointBatch
	dvec *tensor.Dense // [B*K,H] candidate vectors (query tower only)
	pIn  *model.Inputs // B*K candidate passages (both towers)
}

// Logits builds the query tower, the candidates (the passage tower when both) and the
// retrieval logits s [B,K] into g; its inputs are named after JointBatch.Name.
func (r *ReaderRetrieval) Logits(g *gorgonia.ExprGraph, b *model.Binder, both bool, sim losses.Similarity) (*gorgonia.Node, error) {
	B, K, x, name := r.B, r.K, r.Index, r.Name
	r.QueryIn = model.NewInputs(g, B, x.L, name+".query")
	q, err := r.M.Query.Build(b, r.QueryIn, false)
	if err != nil {
		return nil, err
	}
	var d *gorgonia.Node
	if both {
		r.pIn = model.NewInputs(g, B*K, x.L, name+".passages")
		if d, err = r.M.Passage.Build(b, r.pIn, false); err != nil {
			return nil, err
		}
	} else {
		r.dvec = tensor.New(tensor.WithShape(B*K, x.Dim), tensor.Of(tensor.Float32))
		d = gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B*K, x.Dim), gorgonia.WithValue(r.dvec), gorgonia.WithName(name+".candidates"))
	}
	return losses.RetrievalLogits(q, d, K, x.Temperature, sim)
}

// DrawK is JointBatch.Draw, with each question's first K candidates; an error when a
// question has fewer.
func (r *ReaderRetrieval) DrawK(step int) (batch []int, cands [][]int, err error) {
	batch, _, cands, err = r.Draw(step)
	if err != nil {
		return nil, nil, err
	}
	for b, qi := range batch {
		if len(cands[b]) < r.K {
			return nil, nil, fmt.Errorf("question %q: %d candidates, want K = %d", r.Qs[qi].Query, len(cands[b]), r.K)
		}
		cands[b] = cands[b][:r.K]
	}
	return batch, cands, nil
}

// LetCandidates loads the candidates of DrawK into the graph: their index vectors, or their
// texts for the passage tower.
func (r *ReaderRetrieval) LetCandidates(cands [][]int) error {
	dim := r.Index.Dim
	var ptexts []string
	for b := range cands {
		for k, row := range cands[b] {
			if r.dvec != nil {
				copy(r.dvec.Data().([]float32)[(b*r.K+k)*dim:], r.Index.Vecs[row*dim:(row+1)*dim])
			} else {
				ptexts = append(ptexts, r.Index.Texts[row])
			}
		}
	}
	if r.pIn != nil {
		pb := r.PassageCut.Add(r.Tok.EncodeBatch(ptexts, r.Index.L))
		if err := r.pIn.Let(pb.IDs, pb.Mask, pb.Types); err != nil {
			return err
		}
	}
	return nil
}

// RunStep finishes a step of a reader-supervised task once its teacher is loaded: the
// candidates of DrawK go into the graph, the machine of gp runs the forward and backward pass,
// and it returns the loss and the batch's questions (trainer.Task.Step).
func (r *ReaderRetrieval) RunStep(cands [][]int, gp *trainer.GraphParams, loss *gorgonia.Node) (float64, int, error) {
	if err := r.LetCandidates(cands); err != nil {
		return 0, 0, err
	}
	if err := gp.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(loss), r.B, nil
}
