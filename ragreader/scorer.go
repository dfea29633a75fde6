package ragreader

import (
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
)

// ScorePair is one reader row to score: the answer's tokens (with [SEP]) after
// "<ctx> passage </ctx> prompt" (Format.Prompt).
type ScorePair struct {
	Passage, Prompt string
	Answer          []int
}

// ScoreAnswerTokens is T, the most answer tokens (with [SEP]) a scored answer may have.
const ScoreAnswerTokens = 8

// Scorer runs a frozen reader over batches of B rows (one inference graph, no dropout,
// no gradient, built once) and returns, per row, the answer's log-likelihood
// log p(y | passage, x) in nats, the sum of its tokens' log-probabilities, and, when built
// with attention, the attention mass on the passage's tokens (losses.AttentionMass: from the
// positions that predict the answer, averaged over heads and layers). The reader must not
// change while the scorer is used.
type Scorer struct {
	f     *Format
	B, T  int
	heads int
	in    *model.Inputs
	tg    *model.Targets
	logp  *gorgonia.Node
	attn  []*gorgonia.Node // per layer [B,heads,L,L]; nil without attention
	vm    gorgonia.VM
	ids   []int
	mask  []float32
	pos   []int
	tgt   []int
	layer [][]float64 // one row's attention, per layer
}

// NewScorer builds the scorer of r for rows in the format f, B rows per pass;
// attention adds the attention mass (model.Reader.BuildLogProbsAttention, whose
// log-probabilities are the same bits as BuildLogProbs').
func NewScorer(r *model.Reader, f *Format, B int, attention bool) (*Scorer, error) {
	T, L := ScoreAnswerTokens, f.L
	sc := &Scorer{f: f, B: B, T: T, heads: r.Cfg.Heads, ids: make([]int, B*L), mask: make([]float32, B*L), pos: make([]int, B*T), tgt: make([]int, B*T)}
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	sc.in = model.NewInputs(g, B, L, "scorer.reader")
	sc.tg = model.NewTargets(g, B*T, "scorer.answer")
	var err error
	if attention {
		sc.logp, sc.attn, err = r.BuildLogProbsAttention(b, sc.in, sc.tg)
	} else {
		sc.logp, err = r.BuildLogProbs(b, sc.in, sc.tg, false)
	}
	if err != nil {
		return nil, err
	}
	sc.layer = make([][]float64, len(sc.attn))
	for l := range sc.layer {
		sc.layer[l] = make([]float64, sc.heads*L*L)
	}
	sc.vm = gorgonia.NewTapeMachine(g)
	return sc, nil
}

// Score returns the log-likelihood (nats) of every pair and, with attention, its attention
// mass (nil without).
func (sc *Scorer) Score(pairs []ScorePair) (loglik, mass []float64, err error) {
	loglik = make([]float64, len(pairs))
	if sc.attn != nil {
		mass = make([]float64, len(pairs))
	}
	L := sc.f.L
	type span struct {
		queries  []int
		from, to int
	}
	spans := make([]span, sc.B)
	for start := 0; start < len(pairs); start += sc.B {
		end := min(start+sc.B, len(pairs))
		clear(sc.ids)
		clear(sc.mask)
		for i := range sc.pos {
			sc.pos[i], sc.tgt[i] = -1, 0
		}
		for r, p := range pairs[start:end] {
			if len(p.Answer) > sc.T {
				return nil, nil, fmt.Errorf("reader scorer: answer of %d tokens, at most %d", len(p.Answer), sc.T)
			}
			prompt, _, err := sc.f.Prompt(p.Passage, p.Prompt, len(p.Answer))
			if err != nil {
				return nil, nil, err
			}
			seq := append(prompt, p.Answer...)
			copy(sc.ids[r*L:], seq)
			for j := range seq {
				sc.mask[r*L+j] = 1
			}
			sp := span{from: 2, to: slices.Index(prompt, sc.f.CtxEnd)}
			for j, a := range p.Answer {
				q := len(prompt) - 1 + j // the position whose output predicts answer token j
				sc.pos[r*sc.T+j] = r*L + q
				sc.tgt[r*sc.T+j] = a
				sp.queries = append(sp.queries, q)
			}
			spans[r] = sp
		}
		if err := sc.in.Let(sc.ids, sc.mask, nil); err != nil {
			return nil, nil, err
		}
		if err := sc.tg.Let(sc.pos, sc.tgt); err != nil {
			return nil, nil, err
		}
		if err := sc.vm.RunAll(); err != nil {
			return nil, nil, err
		}
		lp := sc.logp.Value().Data().([]float32)
		for r := range end - start {
			var sum float64
			for j := range sc.T {
				sum += float64(lp[r*sc.T+j])
			}
			loglik[start+r] = sum
			if mass == nil {
				continue
			}
			block := sc.heads * L * L
			for l, a := range sc.attn {
				w := a.Value().Data().([]float32)[r*block : (r+1)*block]
				for i, v := range w {
					sc.layer[l][i] = float64(v)
				}
			}
			sp := spans[r]
			if mass[start+r], err = losses.AttentionMass(sc.layer, sc.heads, L, sp.queries, sp.from, sp.to); err != nil {
				return nil, nil, err
			}
		}
		sc.vm.Reset()
	}
	return loglik, mass, nil
}

// Close releases the scorer's machine.
func (sc *Scorer) Close() { sc.vm.Close() }
