package repluglm

import (
	"fmt"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// streamBatches is the batch stream of the training claims (XORed into the seed).
const streamBatches = 0x726c6d62 // "rlmb"

// task trains the query tower with losses.RePlugKL: per step, B training claims (each epoch a
// new permutation of the seed, ragreader.Cycle), each with its k fixed candidates; the
// retrieval logits s [B,k] = cos(q, d) / gamma (ragjoint.ReaderRetrieval over the frozen
// datastore vectors, no dropout) against the cached LM log-likelihoods lm [B,k] (a constant).
type task struct {
	ragjoint.ReaderRetrieval
	ll   [][]float32   // per claim, its k LM log-likelihoods
	lm   *tensor.Dense // [B,k]
	loss *gorgonia.Node
	trainer.GraphParams
}

func newTask(m *model.BiEncoder, tok *tokenize.Tokenizer, x *ragjoint.Index, qs []ragjoint.Question, cands [][]int, ll [][]float32,
	B int, tauLM float64, seed uint64) (*task, error) {
	if len(qs) == 0 || len(cands) != len(qs) || len(ll) != len(qs) {
		return nil, fmt.Errorf("replug_lm task: %d claims, %d candidate lists, %d score lists", len(qs), len(cands), len(ll))
	}
	K := len(cands[0])
	next := func(step int) []int { return ragreader.Cycle(len(qs), B, step, seed^streamBatches) }
	t := &task{ll: ll}
	t.ReaderRetrieval = ragjoint.ReaderRetrieval{JointBatch: ragjoint.JointBatch{Name: "replug_lm", M: m, Tok: tok, Index: x, Qs: qs, Next: next,
		Retrieve: func(step int, _ []float32, _ []string) ([][]int, error) { // the fixed candidates of the step's claims
			batch := next(step)
			out := make([][]int, len(batch))
			for b, qi := range batch {
				out[b] = cands[qi]
			}
			return out, nil
		}, B: B, K: K}}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	s, err := t.Logits(g, b, false, losses.Cosine)
	if err != nil {
		return nil, err
	}
	t.lm = tensor.New(tensor.WithShape(B, K), tensor.Of(tensor.Float32))
	lm := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(B, K), gorgonia.WithValue(t.lm), gorgonia.WithName("replug_lm.lm_loglik"))
	// s already holds cos / gamma, so the retriever's temperature in RePlugKL is 1.
	if t.loss, err = losses.RePlugKL(s, lm, 1, tauLM); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("replug_lm gradient graph: %w", err)
	}
	t.GraphParams = trainer.NewGraphParams(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...)))
	return t, nil
}

// Step runs step's batch.
func (t *task) Step(step int) (float64, int, error) {
	batch, cands, err := t.DrawK(step)
	if err != nil {
		return 0, 0, err
	}
	lm := t.lm.Data().([]float32)
	for b, qi := range batch {
		copy(lm[b*t.K:(b+1)*t.K], t.ll[qi])
	}
	return t.RunStep(cands, &t.GraphParams, t.loss)
}

// Close releases the graph's machine.
func (t *task) Close() { t.VM.Close() }
