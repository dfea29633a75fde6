package scifactverify

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/ragreader"
	"github.com/ragtrain/ragtrain/trainer"
)

// pair is one training (claim, passage) pair: a passage (format.windows) of one of the claim's
// gold evidence abstracts or of its top train_k BM25 abstracts, with the passage's annotation.
type pair struct {
	claim Claim
	doc   *Doc
	w     window
	gold  gold
}

// trainPairs lists, for each training claim, every passage of its gold evidence abstracts (in
// doc id order; a passage holding rationale sentences carries the label and them, another is
// NOT ENOUGH INFO: its evidence is elsewhere), then one passage of each retrieved abstract that
// is not evidence (in rank order; NOT ENOUGH INFO), the passage a hash of (claim, doc) picks so
// that such passages come from every part of an abstract, as at decoding. The critic's
// judgements of Self-RAG come from the annotation, not from a critic model.
func trainPairs(f *format, s *split, retrieved map[int][]int, corpus *Corpus) []pair {
	var out []pair
	for _, c := range s.claims {
		g := s.gold[c.ID]
		var docs []int
		for d := range g.Evidence {
			docs = append(docs, d)
		}
		slices.Sort(docs)
		for _, d := range docs {
			doc, gd := corpus.ByID[d], goldOf(g, d)
			for _, w := range f.windows(doc) {
				out = append(out, pair{claim: c, doc: doc, w: w, gold: gd.in(w)})
			}
		}
		for _, d := range retrieved[c.ID] {
			if _, ok := g.Evidence[d]; ok {
				continue
			}
			doc := corpus.ByID[d]
			ws := f.windows(doc)
			out = append(out, pair{claim: c, doc: doc, w: ws[pickPassage(c.ID, d, len(ws))]})
		}
	}
	return out
}

// pickPassage is which of n passages of doc a non-evidence training pair of claim shows: a
// multiplicative hash of the two ids, so every part of the abstracts is shown across pairs.
func pickPassage(claim, doc, n int) int {
	c, d := uint64(claim), uint64(doc)
	return int(((c*0x9e3779b97f4a7c15 ^ d*0xbf58476d1ce4e5b9) >> 17) % uint64(n))
}

// seqTask trains the LoRA adapters on batches of B sequences of at most L tokens, the loss the
// mean negative log-likelihood of the target tokens (seq.loss). Step s takes sequences s·B ..
// s·B+B-1 of the sequence of epochs, each a permutation drawn from (seed, epoch), so a batch
// depends on the step alone (exact resume); the LoRA dropout masks are drawn from (seed, step).
type seqTask struct {
	trainer.GraphParams
	B, L int
	seqs []seq
	seed uint64
	lora *model.LlamaLoRA
	last float64 // the loss of the last step run
	lb   *model.LMBatch
	loss *gorgonia.Node
}

func newSeqTask(m *model.Llama, B int, seqs []seq, seed uint64) (*seqTask, error) {
	L := 2
	for _, s := range seqs {
		L = max(L, len(s.ids))
	}
	t := &seqTask{B: B, L: L, seqs: seqs, seed: seed, lora: m.LoRA()}
	if t.lora == nil {
		return nil, fmt.Errorf("scifact_verify: the reader has no LoRA attached")
	}
	t.lora.Train = true
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	var err error
	if t.lb, err = model.NewLMBatch(g, b, m, B, L, "sv", false); err != nil {
		return nil, err
	}
	if t.loss, err = losses.TokenNLL(t.lb.LogP, t.lb.KeepN); err != nil {
		return nil, err
	}
	keep := map[*model.Param]bool{}
	var nodes gorgonia.Nodes
	for _, p := range t.lora.Params() {
		keep[p] = true
		nodes = append(nodes, b.Node(p))
	}
	if _, err := model.Grad(t.loss, nodes...); err != nil {
		return nil, fmt.Errorf("scifact_verify gradient graph: %w", err)
	}
	t.GraphParams = trainer.NewGraphParamsOf(b, gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(nodes...)), func(p *model.Param) bool { return keep[p] })
	return t, nil
}

func (t *seqTask) Step(step int) (float64, int, error) {
	batch := make([]seq, t.B)
	ids := make([][]int, t.B)
	for j, k := range ragreader.Cycle(len(t.seqs), t.B, step, t.seed) {
		batch[j], ids[j] = t.seqs[k], t.seqs[k].ids
	}
	// Row r's token j+1 is a target when the sequence's loss mask says so.
	if err := t.lb.Let(ids, func(r, j int) bool { return batch[r].loss[j] }); err != nil {
		return 0, 0, err
	}
	t.lora.RNG.R = rand.New(rand.NewPCG(t.seed^0x6c6f7261, uint64(step)))
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	t.last = trainer.ScalarValue(t.loss)
	return t.last, len(batch), nil
}
