package experiment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// pairBatch is one contrastive batch in text: B queries and N >= B passages, passage i < B the
// positive of query i, the rest hard negatives shared by every query.
type pairBatch struct {
	Queries, Passages []string
	// Mask, when not nil, is B x N: 0 removes candidate j from query i's softmax (a passage
	// judged relevant to query i that serves as another query's positive or negative).
	Mask []float32
}

// biTask trains a bi-encoder with InfoNCE: one Gorgonia graph for a fixed shape (B queries,
// N passages, L tokens), built once and run every step.
type biTask struct {
	m      *model.BiEncoder
	tok    *tokenize.Tokenizer
	L      int
	seed   uint64
	stream uint64 // dropout stream of the phase
	next   func(step int) (pairBatch, error)
	g      *gorgonia.ExprGraph
	vm     gorgonia.VM
	qIn    *model.Inputs
	pIn    *model.Inputs
	loss   *gorgonia.Node
	mask   *tensor.Dense // B x N additive mask, nil when the task takes none
	graphParams
	B, N    int
	lastTru int        // texts truncated in the last batch
	qCut    truncCount // what truncation to L cut of the queries, over the steps run
	pCut    truncCount // and of the passages
}

func newBiTask(m *model.BiEncoder, tok *tokenize.Tokenizer, B, N, L int, loss contrastiveLoss, masked bool,
	seed, stream uint64, next func(step int) (pairBatch, error)) (*biTask, error) {
	t := &biTask{m: m, tok: tok, L: L, seed: seed, stream: stream, next: next, B: B, N: N}
	t.g = gorgonia.NewGraph()
	b := model.NewBinder(t.g)
	t.qIn = model.NewInputs(t.g, B, L, "query")
	t.pIn = model.NewInputs(t.g, N, L, "passage")
	q, err := m.Query.Build(b, t.qIn, true)
	if err != nil {
		return nil, err
	}
	p, err := m.Passage.Build(b, t.pIn, true)
	if err != nil {
		return nil, err
	}
	in := losses.Inputs{Q: q, P: p, Tau: loss.tau, Sim: loss.sim}
	if masked {
		t.mask = tensor.New(tensor.WithShape(B, N), tensor.Of(tensor.Float32))
		in.Mask = gorgonia.NewMatrix(t.g, tensor.Float32, gorgonia.WithShape(B, N), gorgonia.WithValue(t.mask), gorgonia.WithName("candidate_mask"))
	}
	if t.loss, err = loss.spec.Build(in); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("gradient graph: %w", err)
	}
	t.vm = gorgonia.NewTapeMachine(t.g, gorgonia.BindDualValues(b.Nodes()...))
	t.graphParams = newGraphParams(b, t.vm)
	return t, nil
}

func (t *biTask) Step(step int) (float64, int, error) {
	pb, err := t.next(step)
	if err != nil {
		return 0, 0, err
	}
	if len(pb.Queries) != t.B || len(pb.Passages) != t.N {
		return 0, 0, fmt.Errorf("batch of %d queries and %d passages, graph built for %d and %d",
			len(pb.Queries), len(pb.Passages), t.B, t.N)
	}
	if t.mask != nil {
		m := t.mask.Data().([]float32)
		if len(pb.Mask) != len(m) {
			return 0, 0, fmt.Errorf("candidate mask of %d values, want %d", len(pb.Mask), len(m))
		}
		for i, keep := range pb.Mask {
			m[i] = 0
			if keep == 0 {
				m[i] = float32(math.Inf(-1))
			}
		}
	}
	qb := t.qCut.add(t.tok.EncodeBatch(pb.Queries, t.L))
	pbt := t.pCut.add(t.tok.EncodeBatch(pb.Passages, t.L))
	t.lastTru = qb.Truncated + pbt.Truncated
	if err := t.qIn.Let(qb.IDs, qb.Mask, qb.Types); err != nil {
		return 0, 0, err
	}
	if err := t.pIn.Let(pbt.IDs, pbt.Mask, pbt.Types); err != nil {
		return 0, 0, err
	}
	// Dropout masks depend on (seed, phase, step) only, so a resumed run draws the same ones.
	t.m.SetRNG(rand.New(rand.NewPCG(t.seed^t.stream, uint64(step))))
	if err := t.run(); err != nil {
		return 0, 0, err
	}
	return scalarValue(t.loss), t.B, nil
}

func (t *biTask) Close() { t.vm.Close() }

func (t *biTask) truncation() (int, []truncPart) {
	return t.L, []truncPart{{"queries", &t.qCut}, {"passages", &t.pCut}}
}

// contrastiveLoss is a bi-encoder's loss: loss.name from the losses table (a contrastive
// one), loss.temperature and loss.similarity, parsed once per run.
type contrastiveLoss struct {
	spec losses.Spec
	tau  float64
	sim  losses.Similarity
}

// newContrastiveLoss reads the recipe's [loss]: a bi-encoder trains a contrastive loss.
func newContrastiveLoss(rec *configs.Recipe) (contrastiveLoss, error) {
	spec, err := losses.Lookup(rec.Loss.Name)
	if err != nil {
		return contrastiveLoss{}, fmt.Errorf("loss.name: %w", err)
	}
	if spec.Batch != losses.Contrastive {
		return contrastiveLoss{}, fmt.Errorf("loss.name = %q: a %s loss, but a bi-encoder trains a %s one (%s); list losses train cross-encoders (kind = \"reranker\", rerank.losses)",
			rec.Loss.Name, spec.Batch, losses.Contrastive, strings.Join(losses.Names(losses.Contrastive), ", "))
	}
	sim, err := losses.ParseSimilarity(rec.Loss.Similarity)
	if err != nil {
		return contrastiveLoss{}, fmt.Errorf("loss.similarity: %w", err)
	}
	return contrastiveLoss{spec: spec, tau: rec.Loss.Temperature, sim: sim}, nil
}

// infoNCE is the losses table's InfoNCE with temperature tau and similarity sim.
func infoNCE(tau float64, sim losses.Similarity) (contrastiveLoss, error) {
	spec, err := losses.Lookup("infonce")
	return contrastiveLoss{spec: spec, tau: tau, sim: sim}, err
}

// cosine reports whether the loss compares L2-normalised embeddings (the index then holds
// normalised rows).
func (l contrastiveLoss) cosine() bool { return l.sim == losses.Cosine }

// graphParams is the trainer's side of a training graph: the parameters bound in it, with the
// gradients of the last run. A task embeds it for Params and AfterUpdate.
type graphParams struct {
	vm     gorgonia.VM
	bound  []model.Bound
	params []trainer.Param
}

// newGraphParams takes the parameters bound by b in the graph that vm runs.
func newGraphParams(b *model.Binder, vm gorgonia.VM) graphParams {
	gp := graphParams{vm: vm, bound: b.Bound()}
	gp.params = make([]trainer.Param, len(gp.bound))
	for i, bd := range gp.bound {
		gp.params[i] = trainer.Param{Name: bd.Param.Name, Value: bd.Param.Value.Data().([]float32)}
	}
	return gp
}

// run runs the graph's forward and backward pass and points every parameter's Grad at its
// gradient.
func (gp *graphParams) run() error {
	if err := gp.vm.RunAll(); err != nil {
		return err
	}
	for i, bd := range gp.bound {
		gv, err := bd.Node.Grad()
		if err != nil {
			return fmt.Errorf("gradient of %s: %w", bd.Param.Name, err)
		}
		gp.params[i].Grad = gv.Data().([]float32)
	}
	return nil
}

func (gp *graphParams) Params() []trainer.Param { return gp.params }

// AfterUpdate zeroes the gradients (a TapeMachine adds each run's gradients to the previous
// ones) and resets the machine for the next step.
func (gp *graphParams) AfterUpdate() {
	for _, p := range gp.params {
		clear(p.Grad)
	}
	gp.vm.Reset()
}

func scalarValue(n *gorgonia.Node) float64 {
	switch v := n.Value().Data().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	case []float32:
		return float64(v[0])
	case []float64:
		return v[0]
	}
	panic(fmt.Sprintf("loss node holds %T", n.Value().Data()))
}
