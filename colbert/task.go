package colbert

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Batch is one training batch in text: B queries and N = B(1+M) passages, passage i < B the
// positive of query i, then each query's M hard negatives in query order (rows B+iM ..
// B+iM+M-1 are query i's); colbert_contrastive uses every passage as a candidate of every
// query, colbert_kl_distill each query's own 1+M. Teacher, for colbert_kl_distill, is B×(1+M):
// row i the teacher's scores of query i's positive, then of its negatives. Mask, for a Masked
// colbert_contrastive, is the sampler's B×N candidate mask (sampler.Batch.Mask): 1 keeps
// passage j for query i, 0 removes it from the query's softmax (a false negative).
type Batch struct {
	Queries, Passages []string
	Teacher           []float32
	Mask              []float32
}

// Loss is a ColBERT training loss from the losses table (colbert_contrastive or
// colbert_kl_distill) with its settings.
type Loss struct {
	Name               string
	Temperature        float64 // the student's (PyLate: 1 for Contrastive, 1 for Distillation)
	TeacherTemperature float64 // colbert_kl_distill only
	NoMinMax           bool    // colbert_kl_distill: PyLate's normalize_scores = False
	// Masked (colbert_contrastive only) removes the candidates Batch.Mask zeroes
	// (losses.ColBERTContrastiveMasked): sampler.false_negatives = "mask".
	Masked bool
}

// Graph is the training graph of a ColBERT model for B queries and N passages of fixed lengths
// (QueryLength, and DocumentLength or a shorter bucket, L of P): token vectors, the loss, its
// gradients. Cosine similarity and PyLate's masking (passage padding and skiplist multiplied
// out, MaskZero; every query token scored) as pylate.losses.Contrastive and Distillation
// compute them.
type Graph struct {
	B, N   int
	G      *gorgonia.ExprGraph
	VM     gorgonia.VM
	Q, P   *model.Inputs
	Binder *model.Binder
	head
}

// head is a ColBERT loss over token vectors q [B,Lq,Dim] and p [N,Ld,Dim] (not normalised) and
// the constants a batch fills: the scored passage tokens, the teacher's scores, the candidate
// mask. The training graph builds it over the encoder's outputs, the gradient-cached task over
// the cached token vectors.
type head struct {
	Loss    *gorgonia.Node
	pmask   *tensor.Dense // [N, Ld] scored passage tokens
	teacher *tensor.Dense // [B, 1+M], colbert_kl_distill only
	cmask   *tensor.Dense // [B, N] additive candidate mask (0 or -Inf), Loss.Masked only
}

// lossSpec looks loss up and checks it is a late-interaction loss for B queries and N passages.
func lossSpec(loss Loss, B, N int) (losses.Spec, error) {
	spec, err := losses.Lookup(loss.Name)
	if err != nil {
		return spec, err
	}
	if spec.Batch != losses.LateInteraction {
		return spec, fmt.Errorf("colbert: loss %q is a %s loss, want a late-interaction one (colbert_contrastive, colbert_kl_distill)", loss.Name, spec.Batch)
	}
	if B < 1 || N < B {
		return spec, fmt.Errorf("colbert: batch of %d queries and %d passages, want N >= B >= 1", B, N)
	}
	return spec, nil
}

// newHead adds loss over q and p to g, its gradients not yet taken.
func newHead(g *gorgonia.ExprGraph, q, p *gorgonia.Node, loss Loss, spec losses.Spec) (head, error) {
	var h head
	B, N, Ld, dt := q.Shape()[0], p.Shape()[0], p.Shape()[1], q.Dtype()
	h.pmask = tensor.New(tensor.WithShape(N, Ld), tensor.Of(dt))
	in := losses.Inputs{Q: q, P: p, PTokenMask: h.pmask, TokenMasking: losses.MaskZero, Similarity: losses.Cosine,
		Temperature: loss.Temperature, TeacherTemperature: loss.TeacherTemperature, NoMinMax: loss.NoMinMax}
	if spec.Teacher {
		if N%B != 0 || N == B {
			return h, fmt.Errorf("colbert: %s needs each query's hard negatives (N = B(1+M), M >= 1), got B = %d, N = %d", loss.Name, B, N)
		}
		h.teacher = tensor.New(tensor.WithShape(B, N/B), tensor.Of(dt))
		in.Teacher = h.teacher
	}
	if loss.Masked {
		if spec.Teacher {
			return h, fmt.Errorf("colbert: %s scores each query's own candidates with the teacher's scores; a candidate mask is for colbert_contrastive", loss.Name)
		}
		h.cmask = tensor.New(tensor.WithShape(B, N), tensor.Of(dt))
		in.Mask = gorgonia.NewMatrix(g, dt, gorgonia.WithShape(B, N), gorgonia.WithValue(h.cmask), gorgonia.WithName("candidate_mask"))
	}
	var err error
	h.Loss, err = spec.Build(in)
	return h, err
}

// NewGraph builds the graph of m's loss for B queries and N passages (train: with dropout).
func NewGraph(m *Model, B, N int, loss Loss, train bool) (*Graph, error) {
	return newGraph(m, B, N, m.Cfg.DocumentLength, loss, train)
}

// newGraph is NewGraph with passages padded to Ld tokens.
func newGraph(m *Model, B, N, Ld int, loss Loss, train bool) (*Graph, error) {
	spec, err := lossSpec(loss, B, N)
	if err != nil {
		return nil, err
	}
	dt := m.Proj.Value.Dtype()
	t := &Graph{B: B, N: N, G: gorgonia.NewGraph()}
	t.Binder = model.NewBinder(t.G)
	t.Q = model.NewInputsOf(t.G, B, m.Cfg.QueryLength, "query", dt)
	t.P = model.NewInputsOf(t.G, N, Ld, "passage", dt)
	q, err := m.BuildTokens(t.Binder, t.Q, train)
	if err != nil {
		return nil, err
	}
	p, err := m.BuildTokens(t.Binder, t.P, train)
	if err != nil {
		return nil, err
	}
	if t.head, err = newHead(t.G, q, p, loss, spec); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.Loss, t.Binder.Nodes()...); err != nil {
		return nil, fmt.Errorf("colbert: gradient graph: %w", err)
	}
	t.VM = gorgonia.NewTapeMachine(t.G, gorgonia.BindDualValues(t.Binder.Nodes()...))
	return t, nil
}

// Fill encodes a batch into the graph's inputs.
func (t *Graph) Fill(m *Model, tok *tokenize.Tokenizer, mk Markers, b Batch, qCut, pCut *tokenize.TruncCount) error {
	q, p, err := encodeBatch(m, tok, mk, b, t.B, t.N, qCut, pCut)
	if err != nil {
		return err
	}
	return t.fill(q, p, b)
}

// encodeBatch encodes b's B queries and N passages as EncodeQueries and EncodeDocuments do,
// counting what truncation cut.
func encodeBatch(m *Model, tok *tokenize.Tokenizer, mk Markers, b Batch, B, N int, qCut, pCut *tokenize.TruncCount) (Encoded, Encoded, error) {
	if len(b.Queries) != B || len(b.Passages) != N {
		return Encoded{}, Encoded{}, fmt.Errorf("colbert: batch of %d queries and %d passages, graph built for %d and %d", len(b.Queries), len(b.Passages), B, N)
	}
	q := m.EncodeQueries(tok, mk, b.Queries)
	p := m.EncodeDocuments(tok, mk, b.Passages)
	qCut.Add(q.Batch)
	pCut.Add(p.Batch)
	return q, p, nil
}

// fill lets the encoded batch into the graph's inputs (p of the graph's passage length) and
// fills the loss's constants.
func (t *Graph) fill(q, p Encoded, b Batch) error {
	if err := t.Q.Let(q.IDs, q.Mask, q.Types); err != nil {
		return err
	}
	if err := t.P.Let(p.IDs, p.Mask, p.Types); err != nil {
		return err
	}
	return t.head.fill(b, p.Score)
}

// fill copies the scored passage tokens (N x Ld) and b's teacher scores and candidate mask into
// the head's constants.
func (h *head) fill(b Batch, score []float32) error {
	if len(score) != h.pmask.Len() {
		return fmt.Errorf("colbert: %d passage token flags, want %v", len(score), h.pmask.Shape())
	}
	setFloats(h.pmask, score)
	if h.teacher != nil {
		if len(b.Teacher) != h.teacher.Len() {
			return fmt.Errorf("colbert: teacher scores: %d values, want %d (B x (1+M))", len(b.Teacher), h.teacher.Len())
		}
		setFloats(h.teacher, b.Teacher)
	} else if b.Teacher != nil {
		return fmt.Errorf("colbert: teacher scores given to a loss without a teacher")
	}
	switch {
	case h.cmask != nil && len(b.Mask) != h.cmask.Len():
		return fmt.Errorf("colbert: candidate mask of %d values, want %d (B x N)", len(b.Mask), h.cmask.Len())
	case h.cmask != nil:
		add := make([]float32, len(b.Mask))
		for i, keep := range b.Mask {
			if keep == 0 {
				add[i] = float32(math.Inf(-1))
			}
		}
		setFloats(h.cmask, add)
	case b.Mask != nil:
		return fmt.Errorf("colbert: a candidate mask given to a graph built without Loss.Masked")
	}
	return nil
}

// setFloats copies v into t (float32 or float64).
func setFloats(t *tensor.Dense, v []float32) {
	switch d := t.Data().(type) {
	case []float32:
		copy(d, v)
	case []float64:
		for i, x := range v {
			d[i] = float64(x)
		}
	}
}

// source gives a task its steps' batches (next), encoded as EncodeQueries and EncodeDocuments
// encode them, and counts what truncation cut over the steps run.
type source struct {
	m          *Model
	tok        *tokenize.Tokenizer
	mk         Markers
	B, N       int
	next       func(step int) (Batch, error)
	qCut, pCut tokenize.TruncCount
}

func newSource(m *Model, tok *tokenize.Tokenizer, B, N int, next func(step int) (Batch, error)) (source, error) {
	mk, err := MarkersOf(tok)
	return source{m: m, tok: tok, mk: mk, B: B, N: N, next: next}, err
}

// batch returns step's batch and its queries and passages encoded.
func (s *source) batch(step int) (Batch, Encoded, Encoded, error) {
	b, err := s.next(step)
	if err != nil {
		return b, Encoded{}, Encoded{}, err
	}
	q, p, err := encodeBatch(s.m, s.tok, s.mk, b, s.B, s.N, &s.qCut, &s.pCut)
	return b, q, p, err
}

// Truncation reports what the cut to QueryLength and DocumentLength took over the steps run.
func (s *source) Truncation() (int, []tokenize.TruncPart) {
	return s.m.Cfg.QueryLength, []tokenize.TruncPart{
		{Name: "queries", Count: &s.qCut, L: s.m.Cfg.QueryLength},
		{Name: "passages", Count: &s.pCut, L: s.m.Cfg.DocumentLength},
	}
}

// Task trains a ColBERT model (trainer.Task): each step's batch from Next, encoded, its
// dropout masks drawn from (Seed, step), so a resumed run repeats every step exactly.
type Task struct {
	*Graph
	trainer.GraphParams
	source
	seed uint64
}

// NewTask builds the training task of m (float32) for batches of B queries and N passages.
func NewTask(m *Model, tok *tokenize.Tokenizer, B, N int, loss Loss, seed uint64, next func(step int) (Batch, error)) (*Task, error) {
	src, err := newSource(m, tok, B, N, next)
	if err != nil {
		return nil, err
	}
	g, err := NewGraph(m, B, N, loss, true)
	if err != nil {
		return nil, err
	}
	return &Task{Graph: g, GraphParams: trainer.NewGraphParams(g.Binder, g.VM), source: src, seed: seed}, nil
}

// Step runs step's batch forward and backward and returns the loss and B.
func (t *Task) Step(step int) (float64, int, error) {
	b, q, p, err := t.batch(step)
	if err != nil {
		return 0, 0, err
	}
	if err := t.fill(q, p, b); err != nil {
		return 0, 0, err
	}
	t.m.Enc.SetRNG(rand.New(rand.NewPCG(t.seed, uint64(step))))
	if err := t.GraphParams.Run(); err != nil {
		return 0, 0, err
	}
	return trainer.ScalarValue(t.Loss), t.Graph.B, nil
}

// Close releases the graph.
func (t *Task) Close() { t.Graph.VM.Close() }
