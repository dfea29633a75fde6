package scifactverify

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// pair is one training (claim, abstract) pair: the claim's gold evidence abstracts and its
// top train_k BM25 abstracts.
type pair struct {
	claim Claim
	doc   *Doc
	gold  gold
}

// trainPairs lists each training claim's gold evidence abstracts (in doc id order), then its
// retrieved abstracts that are not evidence (in rank order): the critic's judgements of
// Self-RAG come from the annotation, not from a critic model.
func trainPairs(s *split, retrieved map[int][]int, corpus *Corpus) []pair {
	var out []pair
	for _, c := range s.claims {
		g := s.gold[c.ID]
		var docs []int
		for d := range g.Evidence {
			docs = append(docs, d)
		}
		slices.Sort(docs)
		for _, d := range retrieved[c.ID] {
			if _, ok := g.Evidence[d]; !ok {
				docs = append(docs, d)
			}
		}
		for _, d := range docs {
			out = append(out, pair{claim: c, doc: corpus.ByID[d], gold: goldOf(g, d)})
		}
	}
	return out
}

// seqTask trains the LoRA adapters on batches of B sequences of at most L tokens, the loss the
// mean negative log-likelihood of the target tokens (seq.loss). Step s takes sequences s·B ..
// s·B+B-1 of the sequence of epochs, each a permutation drawn from (seed, epoch), so a batch
// depends on the step alone (exact resume); the LoRA dropout masks are drawn from (seed, step).
type seqTask struct {
	trainer.GraphParams
	B, L  int
	seqs  []seq
	seed  uint64
	lora  *model.LlamaLoRA
	epoch int
	perm  []int
	last  float64 // the loss of the last step run

	ids      []int
	mask     []float32
	pos, tgt []int
	keep     []float32
	in       *model.Inputs
	tg       *model.Targets
	loss     *gorgonia.Node
}

func newSeqTask(m *model.Llama, B int, seqs []seq, seed uint64) (*seqTask, error) {
	L := 2
	for _, s := range seqs {
		L = max(L, len(s.ids))
	}
	t := &seqTask{B: B, L: L, seqs: seqs, seed: seed, lora: m.LoRA(), epoch: -1}
	if t.lora == nil {
		return nil, fmt.Errorf("scifact_verify: the reader has no LoRA attached")
	}
	t.lora.Train = true
	M := B * (L - 1)
	t.ids, t.mask, t.pos, t.tgt = make([]int, B*L), make([]float32, B*L), make([]int, M), make([]int, M)
	keepT := tensor.New(tensor.WithShape(M), tensor.Of(tensor.Float32))
	t.keep = keepT.Data().([]float32)
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	t.in = model.NewInputs(g, B, L, "sv")
	t.tg = model.NewTargets(g, M, "sv.targets")
	logp, err := m.BuildLogProbs(b, t.in, t.tg)
	if err != nil {
		return nil, err
	}
	keepN := gorgonia.NewTensor(g, tensor.Float32, 1, gorgonia.WithShape(M), gorgonia.WithValue(keepT), gorgonia.WithName("sv.keep"))
	if t.loss, err = losses.TokenNLL(logp, keepN); err != nil {
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

// let fills the batch: row r's token j predicts token j+1 in slot r·(L-1)+j, kept when token
// j+1 is a target.
func (t *seqTask) let(batch []seq) error {
	clear(t.ids)
	clear(t.mask)
	clear(t.keep)
	for i := range t.pos {
		t.pos[i], t.tgt[i] = -1, 0
	}
	for r, s := range batch {
		copy(t.ids[r*t.L:], s.ids)
		for j := range s.ids {
			t.mask[r*t.L+j] = 1
			if j+1 < len(s.ids) {
				k := r*(t.L-1) + j
				t.pos[k], t.tgt[k] = r*t.L+j, s.ids[j+1]
				if s.loss[j+1] {
					t.keep[k] = 1
				}
			}
		}
	}
	if err := t.in.Let(t.ids, t.mask, nil); err != nil {
		return err
	}
	return t.tg.Let(t.pos, t.tgt)
}

func (t *seqTask) Step(step int) (float64, int, error) {
	n := len(t.seqs)
	batch := make([]seq, t.B)
	for j := range batch {
		k := step*t.B + j
		if e := k / n; e != t.epoch {
			t.epoch, t.perm = e, rand.New(rand.NewPCG(t.seed, uint64(e))).Perm(n)
		}
		batch[j] = t.seqs[t.perm[k%n]]
	}
	if err := t.let(batch); err != nil {
		return 0, 0, err
	}
	t.lora.RNG.R = rand.New(rand.NewPCG(t.seed^0x6c6f7261, uint64(step)))
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	t.last = trainer.ScalarValue(t.loss)
	return t.last, len(batch), nil
}
