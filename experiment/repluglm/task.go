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
	var err error
	if t.lm, t.loss, t.GraphParams, err = t.RePlugGraph(false, losses.Cosine, tauLM); err != nil {
		return nil, err
	}
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
