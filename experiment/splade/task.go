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
	Loss             losses.Spec // splade, or a distillation loss (Loss.Teacher) reading Teacher's scores
	Temperature      float64
	LambdaQ, LambdaD float64
	FlopsWarmup      int
	Masked           bool   // the sampler's B x N false-negative mask removes candidates
	Seed             uint64 // dropout: PCG(Seed, step)
	Next             func(step int) (sampler.Batch, sampler.Stats, error)
	// Teacher returns the teacher's B x (1+M) scores of a batch (retriever.Teacher.BatchScores)
	// for a distillation loss; TeacherTemperature is loss.teacher_temperature and InfoNCEWeight
	// loss.infonce_weight (w in L = distill + w InfoNCE + FLOPS).
	Teacher            func(sampler.Batch) ([]float32, error)
	TeacherTemperature float64
	InfoNCEWeight      float64
}

// task trains a SPLADE encoder with losses.SpladeLoss or a SPLADE distillation loss: one graph
// for B queries of Lens.Query tokens and N passages of Lens.Passage tokens, each side padded to
// its length, the encoder shared by both sides (its parameters bound once, their gradients
// summed).
type task struct {
	m    *model.BiEncoder
	tok  *tokenize.Tokenizer
	o    taskOptions
	g    *gorgonia.ExprGraph
	qIn  *model.Inputs
	pIn  *model.Inputs
	mask *tensor.Dense // B x N additive, nil unless Masked
	// teacher is the B x (1+M) scores of a distillation loss (nil otherwise), scaled by
	// teacherScale (margin MSE's temperature / teacher_temperature, as the retriever's)
	teacher      *tensor.Dense
	teacherScale float32
	w            losses.FlopsWeights
	loss         *gorgonia.Node
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
	if t.loss, err = t.buildLoss(q, p, maskN); err != nil {
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

// buildLoss adds o.Loss over q and p: splade, or a distillation loss over the teacher's scores
// of each query's candidates plus InfoNCEWeight times InfoNCE over the whole batch (its mask
// applied) when that weight is > 0.
func (t *task) buildLoss(q, p, maskN *gorgonia.Node) (*gorgonia.Node, error) {
	o := t.o
	in := losses.Inputs{Q: q, P: p, Mask: maskN, Temperature: o.Temperature, Similarity: losses.Dot, Flops: &t.w}
	if !o.Loss.Teacher {
		return o.Loss.Build(in)
	}
	if o.Teacher == nil || o.N%o.B != 0 || o.N == o.B {
		return nil, fmt.Errorf("splade task: %s needs the teacher's scores and each query's hard negatives (N = B(1+M), M >= 1), got B = %d, N = %d", o.Loss.Name, o.B, o.N)
	}
	t.teacher, t.teacherScale = tensor.New(tensor.WithShape(o.B, o.N/o.B), tensor.Of(tensor.Float32)), 1
	if o.Loss.Name == "splade_margin_mse" {
		t.teacherScale = float32(o.Temperature / o.TeacherTemperature)
	}
	in.Mask, in.Teacher, in.TeacherTemperature = nil, t.teacher, o.TeacherTemperature
	loss, err := o.Loss.Build(in)
	if err != nil || o.InfoNCEWeight == 0 {
		return loss, err
	}
	spec, err := losses.Lookup("infonce")
	if err != nil {
		return nil, err
	}
	nce, err := spec.Build(losses.Inputs{Q: q, P: p, Mask: maskN, Temperature: o.Temperature, Similarity: losses.Dot})
	if err != nil {
		return nil, err
	}
	if nce, err = gorgonia.Mul(gorgonia.NewConstant(float32(o.InfoNCEWeight), gorgonia.WithName("infonce_weight")), nce); err != nil {
		return nil, fmt.Errorf("loss.infonce_weight: %w", err)
	}
	return gorgonia.Add(loss, nce)
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
	if t.teacher != nil {
		scores, err := t.o.Teacher(bt)
		if err != nil {
			return 0, 0, err
		}
		ts := t.teacher.Data().([]float32)
		if len(scores) != len(ts) {
			return 0, 0, fmt.Errorf("splade task: teacher scores: %d values, want %d (B x (1+M))", len(scores), len(ts))
		}
		for i, v := range scores {
			ts[i] = v * t.teacherScale
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
