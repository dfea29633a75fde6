package ragjoint

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// RetrieveFunc returns each question's candidate rows of the index at step, given the query
// vectors qv [len(texts)*dim] and the query texts (JointBatch.Retrieve).
type RetrieveFunc = func(step int, qv []float32, texts []string) ([][]int, error)

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

// RePlugGraph builds the graph of a RePlug LSR task (Shi et al. 2023, eq. 2-4): the retrieval
// logits s [B,K] of Logits (both: the passage tower too) and losses.RePlugKL between them and
// the reader's log-likelihoods lm [B,K], a constant the task fills before each step (beta =
// tauLM; s already holds sim / tau, so the retriever's temperature in RePlugKL is 1), with its
// gradients and the machine that runs them.
func (r *ReaderRetrieval) RePlugGraph(both bool, sim losses.Similarity, tauLM float64) (lm *tensor.Dense, loss *gorgonia.Node, gp trainer.GraphParams, err error) {
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	s, err := r.Logits(g, b, both, sim)
	if err != nil {
		return nil, nil, gp, err
	}
	lm = tensor.New(tensor.WithShape(r.B, r.K), tensor.Of(tensor.Float32))
	lmN := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(r.B, r.K), gorgonia.WithValue(lm), gorgonia.WithName(r.Name+".lm_loglik"))
	if loss, err = losses.RePlugKL(s, lmN, 1, tauLM); err != nil {
		return nil, nil, gp, err
	}
	if _, err := gorgonia.Grad(loss, b.Nodes()...); err != nil {
		return nil, nil, gp, fmt.Errorf("%s gradient graph: %w", r.Name, err)
	}
	return lm, loss, trainer.NewGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))), nil
}

// RePlugTask is a RePlug LSR task (RePlugGraph) over ReaderRetrieval's batches: each Step draws
// the batch (DrawK), has its fill function write the reader's log-likelihoods of the
// candidates into lm [B*K] (question b's candidate k at b*K+k), then runs the graph (RunStep).
type RePlugTask struct {
	ReaderRetrieval
	lm   *tensor.Dense // [B,K]
	loss *gorgonia.Node
	trainer.GraphParams
	fill func(batch []int, cands [][]int, lm []float32) error
}

// NewRePlugTask builds the RePlug task over r (RePlugGraph(both, sim, tauLM)) whose reader
// log-likelihoods come from fill.
func NewRePlugTask(r ReaderRetrieval, both bool, sim losses.Similarity, tauLM float64, fill func(batch []int, cands [][]int, lm []float32) error) (*RePlugTask, error) {
	t := &RePlugTask{ReaderRetrieval: r, fill: fill}
	var err error
	if t.lm, t.loss, t.GraphParams, err = t.RePlugGraph(both, sim, tauLM); err != nil {
		return nil, err
	}
	return t, nil
}

// Step runs step's batch (trainer.Task.Step).
func (t *RePlugTask) Step(step int) (float64, int, error) {
	batch, cands, err := t.DrawK(step)
	if err != nil {
		return 0, 0, err
	}
	if err := t.fill(batch, cands, t.lm.Data().([]float32)); err != nil {
		return 0, 0, err
	}
	return t.RunStep(cands, &t.GraphParams, t.loss)
}

// Close releases the graph's machine.
func (t *RePlugTask) Close() { t.VM.Close() }
