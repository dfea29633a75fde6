package splade

import (
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/biencoder"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/sampler"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// taskOptions are the settings of a SPLADE training task.
type taskOptions struct {
	B, N             int // queries and passages of a step (passage i < B the positive of query i)
	Lens             biencoder.Lengths
	Temperature      float64
	LambdaQ, LambdaD float64
	FlopsWarmup      int
	Masked           bool   // the sampler's B x N false-negative mask removes candidates
	Seed             uint64 // dropout: PCG(Seed, step)
	Next             func(step int) (sampler.Batch, sampler.Stats, error)
}

// task trains a SPLADE encoder with losses.SpladeLoss: one graph for B queries of Lens.Query
// tokens and N passages of Lens.Passage tokens, each side padded to its length, the encoder
// shared by both sides (its parameters bound once, their gradients summed).
type task struct {
	m    *model.BiEncoder
	tok  *tokenize.Tokenizer
	o    taskOptions
	g    *gorgonia.ExprGraph
	qIn  *model.Inputs
	pIn  *model.Inputs
	mask *tensor.Dense // B x N additive, nil unless Masked
	w    losses.FlopsWeights
	loss *gorgonia.Node
	trainer.GraphParams
}

func newTask(m *model.BiEncoder, s *model.Splade, tok *tokenize.Tokenizer, o taskOptions) (*task, error) {
	if o.Lens.Query < 2 || o.Lens.Passage < 2 {
		return nil, fmt.Errorf("splade task: lengths %d (queries) and %d (passages) leave no room for [CLS] and [SEP]", o.Lens.Query, o.Lens.Passage)
	}
	t := &task{m: m, tok: tok, o: o, g: gorgonia.NewGraph()}
	b := model.NewBinder(t.g)
	t.qIn = model.NewInputs(t.g, o.B, o.Lens.Query, "query")
	t.pIn = model.NewInputs(t.g, o.N, o.Lens.Passage, "passage")
	q, err := s.Build(b, t.qIn, true)
	if err != nil {
		return nil, err
	}
	p, err := s.Build(b, t.pIn, true)
	if err != nil {
		return nil, err
	}
	var maskN *gorgonia.Node
	if o.Masked {
		t.mask = tensor.New(tensor.WithShape(o.B, o.N), tensor.Of(tensor.Float32))
		maskN = gorgonia.NewMatrix(t.g, tensor.Float32, gorgonia.WithShape(o.B, o.N), gorgonia.WithValue(t.mask), gorgonia.WithName("candidate_mask"))
	}
	spec, err := losses.Lookup("splade")
	if err != nil {
		return nil, err
	}
	if t.loss, err = spec.Build(losses.Inputs{Q: q, P: p, Mask: maskN, Temperature: o.Temperature, Similarity: losses.Dot, Flops: &t.w}); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("splade task: gradient graph: %w", err)
	}
	model.ShareBuffers(t.g, t.loss)
	vm := gorgonia.NewTapeMachine(t.g, gorgonia.BindDualValues(b.Nodes()...))
	t.GraphParams = trainer.NewGraphParams(b, vm)
	return t, nil
}

// Step runs step's batch: the sampler's batch of the step, the FLOPS weights of the step's
// warm-up, the step's dropout masks.
func (t *task) Step(step int) (float64, int, error) {
	bt, _, err := t.o.Next(step)
	if err != nil {
		return 0, 0, err
	}
	passages := append(append([]string(nil), bt.Positives...), bt.Negatives...)
	if len(bt.Queries) != t.o.B || len(passages) != t.o.N {
		return 0, 0, fmt.Errorf("splade task: batch of %d queries and %d passages, graph built for %d and %d", len(bt.Queries), len(passages), t.o.B, t.o.N)
	}
	qb, pb := t.tok.EncodeBatch(bt.Queries, t.o.Lens.Query), t.tok.EncodeBatch(passages, t.o.Lens.Passage)
	if err := t.qIn.Let(qb.IDs, qb.Mask, qb.Types); err != nil {
		return 0, 0, err
	}
	if err := t.pIn.Let(pb.IDs, pb.Mask, pb.Types); err != nil {
		return 0, 0, err
	}
	if t.mask != nil {
		m := t.mask.Data().([]float32)
		if len(bt.Mask) != len(m) {
			return 0, 0, fmt.Errorf("splade task: candidate mask of %d values, want %d", len(bt.Mask), len(m))
		}
		for i, keep := range bt.Mask {
			m[i] = 0
			if keep == 0 {
				m[i] = float32(math.Inf(-1))
			}
		}
	}
	t.w = losses.FlopsWeights{Query: losses.FlopsWarmup(t.o.LambdaQ, step, t.o.FlopsWarmup), Passage: losses.FlopsWarmup(t.o.LambdaD, step, t.o.FlopsWarmup)}
	setDropout(t.m, t.o.Seed, step)
	if err := t.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.loss), t.o.B, nil
}

// Close releases the graph's machine.
func (t *task) Close() { t.VM.Close() }
