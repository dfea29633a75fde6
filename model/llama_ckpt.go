package model

import (
	"fmt"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// LlamaCheckpointed is the decoder's training graph with gradient checkpointing (Chen et al.,
// 2016, "Training Deep Nets with Sublinear Memory Cost"; transformers'
// gradient_checkpointing_enable, one checkpoint per decoder layer): the forward pass keeps only
// each layer's input x_i [B*L,H] (a copy: checkpoint i); the activations inside a layer die as
// soon as the layer's forward has read them. The backward pass rebuilds each layer from its
// checkpoint, last layer first, once the gradient of its output is known, and backpropagates
// through that recomputation (gorgonia.Backpropagate with the output's gradient). A layer's
// LoRA dropout masks are replayed from the seeds its forward drew, so the recomputation is the
// same function. Run it with a TapeMachine after ShareBuffers: the tape then holds the
// checkpoints (Layers x B·L·H values), one layer's activations and gradients, and the LM head's.
//
// Loss and gradients are those of BuildLogProbs and gorgonia.Grad bit for bit: the same
// kernels run on the same values, and each gradient sums the same contributions (a sum of two
// terms, the tied embedding's head and lookup gradients, is the same in either order).
type LlamaCheckpointed struct {
	m      *Llama
	b      *Binder
	in     *Inputs
	t      *Targets
	xs     []*gorgonia.Node // x_0 (the embedded tokens), checkpoints x_1..x_Layers (x_Layers: the last layer's output)
	seeds  []*dropSeeds     // per layer, the seeds of its LoRA dropout masks
	hidden *gorgonia.Node   // the final norm's output [B*L,H]
	logp   *gorgonia.Node   // LMLogProb [M]
	head   *lmCache
	graded bool
}

// BuildLogProbsCheckpointed adds the log-probabilities of BuildLogProbs (the same [M] values)
// to the binder's graph, keeping only the layers' inputs for the backward pass; take the
// gradients with Grad, not gorgonia.Grad.
func (m *Llama) BuildLogProbsCheckpointed(b *Binder, in *Inputs, t *Targets) (*LlamaCheckpointed, error) {
	c := m.Cfg
	x, err := m.embed(b, in)
	if err != nil {
		return nil, err
	}
	ck := &LlamaCheckpointed{m: m, b: b, in: in, t: t, xs: []*gorgonia.Node{x}}
	for i := 0; i < c.Layers; i++ {
		s := &dropSeeds{}
		y, err := m.block(b, in, x, i, s)
		if err != nil {
			return nil, fmt.Errorf("model: llama layer %d: %w", i, err)
		}
		if x, err = apply(checkpointK{n: 1}, y); err != nil {
			return nil, err
		}
		ck.xs, ck.seeds = append(ck.xs, x), append(ck.seeds, s)
	}
	if ck.hidden, err = RMSNorm(x, m.node(b, LlamaFinalNorm), c.RMSEps); err != nil {
		return nil, err
	}
	if ck.logp, err = LMLogProb(ck.hidden, b.Node(m.HeadParam()), t.Pos, t.Tgt); err != nil {
		return nil, err
	}
	ck.head = ck.logp.Op().(*customOp).k.(lmK).c
	return ck, nil
}

// LogProbs is the [M] log-probabilities node.
func (ck *LlamaCheckpointed) LogProbs() *gorgonia.Node { return ck.logp }

// Grad adds the gradients of the scalar loss (a function of LogProbs) with respect to wrt,
// nodes of the decoder's parameters (and of its attached LoRA adapters) in the binder, as
// gorgonia.Grad does: each parameter node's gradient is bound to it, so a TapeMachine run with
// gorgonia.BindDualValues(wrt...) leaves it in the node's Grad. The backward pass goes down to
// the lowest layer a parameter of wrt belongs to. Call it once.
func (ck *LlamaCheckpointed) Grad(loss *gorgonia.Node, wrt ...*gorgonia.Node) error {
	if ck.graded {
		return fmt.Errorf("model: llama checkpointed graph: Grad called twice")
	}
	ck.graded = true
	m, n := ck.m, ck.m.Cfg.Layers
	layerOf := map[*Param]int{}
	for i := 0; i < n; i++ {
		for _, what := range llamaBlockParams {
			name := llamaLayer(i, what)
			layerOf[m.byName[name]] = i
			if l := m.lora; l != nil {
				for _, ab := range []string{"A", "B"} {
					if p, ok := l.byName[loraName(name, ab)]; ok {
						layerOf[p] = i
					}
				}
			}
		}
	}
	paramOf := map[*gorgonia.Node]*Param{}
	for _, bd := range ck.b.Bound() {
		paramOf[bd.Node] = bd.Param
	}
	embed := m.byName[LlamaEmbed]
	tied := m.Cfg.TieEmbeddings
	var top gorgonia.Nodes // the head's parameters: the final norm, an untied lm_head
	blocks := make([]gorgonia.Nodes, n)
	lo, embedWanted := n, false
	for _, w := range wrt {
		p := paramOf[w]
		switch {
		case p == nil:
			return fmt.Errorf("model: llama checkpointed graph: %v is not a parameter node of the graph", w)
		case p == embed:
			embedWanted = true
		case p.Name == LlamaFinalNorm || p.Name == LlamaHead:
			top = append(top, w)
		default:
			i, ok := layerOf[p]
			if !ok {
				return fmt.Errorf("model: llama checkpointed graph: %s is not a parameter of the decoder", p.Name)
			}
			blocks[i] = append(blocks[i], w)
			lo = min(lo, i)
		}
	}
	if embedWanted {
		lo = 0
	}
	// The head: the gradient of x_Layers (the last checkpoint) and of the head's parameters.
	if lo < n {
		top = append(gorgonia.Nodes{ck.xs[n]}, top...)
	}
	if len(top) == 0 {
		return nil
	}
	var one *gorgonia.Node
	if m.dt == tensor.Float64 {
		one = gorgonia.NewConstant(float64(1))
	} else {
		one = gorgonia.NewConstant(float32(1))
	}
	one = loss.Graph().AddNode(one)
	var dY *gorgonia.Node
	if len(top) > 0 {
		g, err := gorgonia.Backpropagate(gorgonia.Nodes{loss}, gorgonia.Nodes{one}, top)
		if err != nil {
			return fmt.Errorf("model: llama checkpointed graph, head: %w", err)
		}
		if lo < n {
			dY = g[0]
		}
	}
	// The layers, last first: rebuild layer i on a copy of x_i taken once dY is known (the copy
	// reads dY, so the tape runs the recomputation after the gradient it needs).
	for i := n - 1; i >= lo; i-- {
		x, err := apply(checkpointK{n: 2}, ck.xs[i], dY)
		if err != nil {
			return err
		}
		y, err := m.block(ck.b, ck.in, x, i, &dropSeeds{slots: ck.seeds[i].slots, replay: true})
		if err != nil {
			return fmt.Errorf("model: llama layer %d recomputed: %w", i, err)
		}
		ws := blocks[i]
		needX := i > lo || embedWanted
		if needX {
			ws = append(gorgonia.Nodes{x}, ws...)
		}
		g, err := gorgonia.Backpropagate(gorgonia.Nodes{y}, gorgonia.Nodes{dY}, ws)
		if err != nil {
			return fmt.Errorf("model: llama layer %d backward: %w", i, err)
		}
		if needX {
			dY = g[0]
		}
	}
	if !embedWanted {
		return nil
	}
	// The embedding: the lookup's scatter-add of dx_0, plus, tied, the LM head's gradient (the
	// node LMLogProb's SymDiff made, if the head's backward created it: Gorgonia merges equal
	// nodes), summed as Backpropagate sums the two contributions.
	d, err := gorgonia.ApplyOp(newOp(scatterK{rows: m.Cfg.Vocab}), ck.in.IDs, dY)
	if err != nil {
		return fmt.Errorf("model: llama embedding gradient: %w", err)
	}
	if tied {
		gl := ck.logp.Deriv()
		if gl == nil {
			return fmt.Errorf("model: llama checkpointed graph: the loss does not depend on the log-probabilities")
		}
		h, err := gorgonia.ApplyOp(newOp(lmGradK{c: ck.head, wrtEmb: true}), ck.hidden, ck.b.Node(embed), ck.t.Pos, ck.t.Tgt, gl)
		if err != nil {
			return fmt.Errorf("model: llama head gradient: %w", err)
		}
		if d, err = gorgonia.ReduceAdd(gorgonia.Nodes{h, d}); err != nil {
			return fmt.Errorf("model: llama embedding gradient: %w", err)
		}
	}
	gorgonia.SetDerivOf(d, ck.b.Node(embed))
	return nil
}

// dropSeeds are the seeds of one layer's LoRA dropout masks, in the order the layer builds
// them: its forward records them, its recomputation (replay) reads them.
type dropSeeds struct {
	slots  []*uint64
	replay bool
	next   int
}

// dropout is Dropout(x, p, rng) recording or replaying its seed (s nil: plain Dropout).
func (s *dropSeeds) dropout(x *gorgonia.Node, p float64, rng *RNG) (*gorgonia.Node, error) {
	if s == nil || p == 0 {
		return Dropout(x, p, rng)
	}
	if err := checkDropout(p, rng); err != nil {
		return nil, err
	}
	k := dropMaskK{p: p, rng: rng}
	if s.replay {
		if s.next >= len(s.slots) {
			return nil, fmt.Errorf("model: recomputed layer has more dropout masks (%d) than its forward", s.next+1)
		}
		k.slot, k.replay = s.slots[s.next], true
		s.next++
	} else {
		k.slot = new(uint64)
		s.slots = append(s.slots, k.slot)
	}
	return dropoutSeeded(x, k)
}

// checkpointK copies its first input [N,H]; it passes no gradient. Arity 1: a layer's output
// kept as the next layer's checkpoint (the gradient stops there: the head's backward does not
// go into the layer). Arity 2: (x_i, dY) -> x_i, the input of a layer's recomputation, which
// reading dY orders after the gradient of the layer's output.
type checkpointK struct{ n int }

func (k checkpointK) name() string {
	if k.n == 2 {
		return "Recompute"
	}
	return "Checkpoint"
}
func (k checkpointK) typ() hm.Type {
	if k.n == 2 {
		return fnType(ft(2), ft(2), ft(2))
	}
	return fnType(ft(2), ft(2))
}
func (k checkpointK) diff() []bool                        { return make([]bool, k.n) }
func (k checkpointK) grads(in []tensor.Shape) []*gradTerm { return make([]*gradTerm, k.n) }
func (k checkpointK) shape(in []tensor.Shape) (tensor.Shape, error) {
	if err := want2D(k.name(), 0, in[0]); err != nil {
		return nil, err
	}
	return in[0].Clone(), nil
}
func (checkpointK) forward(in []*tensor.Dense, out *tensor.Dense) error {
	copyFrom(out, in[0], 0)
	return nil
}
