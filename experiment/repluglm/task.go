package repluglm

import (
	"fmt"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragjoint"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/tokenize"
)

// streamBatches is the batch stream of the training claims (XORed into the seed).
const streamBatches = 0x726c6d62 // "rlmb"

// task trains the query tower with losses.RePlugKL: per step, B training claims (each epoch a
// new permutation of the seed, ragreader.Cycle), each with its k fixed candidates; the
// retrieval logits s [B,k] = cos(q, d) / gamma (ragjoint.ReaderRetrieval over the frozen
// datastore vectors, no dropout) against the cached LM log-likelihoods lm [B,k] (a constant).
type task struct {
	*ragjoint.RePlugTask
	ll [][]float32 // per claim, its k LM log-likelihoods
}

func newTask(m *model.BiEncoder, tok *tokenize.Tokenizer, x *ragjoint.Index, qs []ragjoint.Question, cands [][]int, ll [][]float32,
	B int, tauLM float64, seed uint64) (*task, error) {
	if len(qs) == 0 || len(cands) != len(qs) || len(ll) != len(qs) {
		return nil, fmt.Errorf("replug_lm task: %d claims, %d candidate lists, %d score lists", len(qs), len(cands), len(ll))
	}
	K := len(cands[0])
	next := func(step int) []int { return ragreader.Cycle(len(qs), B, step, seed^streamBatches) }
	t := &task{ll: ll}
	r := ragjoint.ReaderRetrieval{JointBatch: ragjoint.JointBatch{Name: "replug_lm", M: m, Tok: tok, Index: x, Qs: qs, Next: next,
		Retrieve: func(step int, _ []float32, _ []string) ([][]int, error) { // the fixed candidates of the step's claims
			batch := next(step)
			out := make([][]int, len(batch))
			for b, qi := range batch {
				out[b] = cands[qi]
			}
			return out, nil
		}, B: B, K: K}}
	var err error
	if t.RePlugTask, err = ragjoint.NewRePlugTask(r, false, losses.Cosine, tauLM, t.fill); err != nil {
		return nil, err
	}
	return t, nil
}

// fill copies the cached LM log-likelihoods of the step's claims into lm [B*k].
func (t *task) fill(batch []int, _ [][]int, lm []float32) error {
	for b, qi := range batch {
		copy(lm[b*t.K:(b+1)*t.K], t.ll[qi])
	}
	return nil
}
