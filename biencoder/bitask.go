package biencoder

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// PairBatch is one contrastive batch in text: B queries and N >= B passages, passage i < B the
// positive of query i, the rest hard negatives shared by every query.
type PairBatch struct {
	Queries, Passages []string
	// Mask, when not nil, is B x N: 0 removes candidate j from query i's softmax (a passage
	// judged relevant to query i that serves as another query's positive or negative).
	Mask []float32
	// Teacher, for a distillation loss, is B x (1+M) (N = B(1+M)): row i the teacher's scores
	// of query i's positive, then of its own hard negatives in order.
	Teacher []float32
}

// BiTask trains a bi-encoder with InfoNCE: one Gorgonia graph for a fixed shape (B queries of
// Len.Query tokens, N passages of Len.Passage tokens), built once and run every step.
type BiTask struct {
	m      *model.BiEncoder
	tok    *tokenize.Tokenizer
	Len    Lengths // the queries' and the passages' lengths, in tokens
	seed   uint64
	stream uint64 // dropout stream of the phase
	next   func(step int) (PairBatch, error)
	biGraph
	B, N    int
	lastTru int                 // texts truncated in the last batch
	qCut    tokenize.TruncCount // what truncation to Len.Query cut of the queries, over the steps run
	pCut    tokenize.TruncCount // and truncation to Len.Passage of the passages
}

// biGraph is the training graph of a bi-encoder for one shape: B queries of qIn.L tokens and N
// passages of pIn.L tokens, the contrastive loss, its gradients and the machine that runs them.
type biGraph struct {
	g    *gorgonia.ExprGraph
	vm   gorgonia.VM
	qIn  *model.Inputs
	pIn  *model.Inputs
	head contrastiveHead
	loss *gorgonia.Node
	trainer.GraphParams
}

// newBiGraph builds the training graph of m for B queries of lens.Query tokens and N passages
// of lens.Passage tokens, with loss (and a B x N candidate mask when masked).
func newBiGraph(m *model.BiEncoder, B, N int, lens Lengths, loss ContrastiveLoss, masked bool) (biGraph, error) {
	var t biGraph
	t.g = gorgonia.NewGraph()
	b := model.NewBinder(t.g)
	t.qIn = model.NewInputs(t.g, B, lens.Query, "query")
	t.pIn = model.NewInputs(t.g, N, lens.Passage, "passage")
	q, err := m.Query.Build(b, t.qIn, true)
	if err != nil {
		return t, err
	}
	p, err := m.Passage.Build(b, t.pIn, true)
	if err != nil {
		return t, err
	}
	if t.head, err = newContrastiveHead(t.g, q, p, B, N, loss, masked); err != nil {
		return t, err
	}
	t.loss = t.head.loss
	if _, err := gorgonia.Grad(t.loss, b.Nodes()...); err != nil {
		return t, fmt.Errorf("gradient graph: %w", err)
	}
	// Only the loss and the parameters' gradients are read after a run: every other value
	// lends its buffer once consumed (bit-identical, less memory).
	model.ShareBuffers(t.g, t.loss)
	t.vm = gorgonia.NewTapeMachine(t.g, gorgonia.BindDualValues(b.Nodes()...))
	t.GraphParams = trainer.NewGraphParams(b, t.vm)
	return t, nil
}

// TaskOptions are the settings of a bi-encoder training task (NewBiTask, NewBucketedBiTask,
// NewCachedBiTask, or New, which picks one of the three from them).
type TaskOptions struct {
	// B and N are the queries and passages of a step (passage i < B the positive of query i).
	B, N int
	// Lengths are each side's L: a fixed-shape task pads every batch to them, a bucketed or
	// dynamic one cuts to them.
	Lengths Lengths
	// Loss is the recipe's contrastive loss (NewContrastiveLoss).
	Loss ContrastiveLoss
	// Masked adds a B x N candidate mask (false negatives removed from a query's softmax).
	Masked bool
	// Seed and Stream seed each step's dropout masks (Stream XORed into Seed).
	Seed, Stream uint64
	// Next gives each step's batch in text (tok encodes it); nil for a task run with
	// StepTokens only.
	Next func(step int) (PairBatch, error)
	// MiniBatch is M, the rows a gradient-caching task (NewCachedBiTask) encodes at a time; it
	// divides B and N. 0: no caching.
	MiniBatch int
	// Dynamic pads each batch to its own length bucket (NewBucketedBiTask; with MiniBatch,
	// each chunk to its own), Buckets bounding the cached graphs.
	Dynamic bool
	Buckets BucketOptions
}

// Task is a bi-encoder training task: trainer.Task with the truncation it counted.
type Task interface {
	Step(step int) (float64, int, error)
	Params() []trainer.Param
	AfterUpdate()
	Close()
	Truncation() (int, []tokenize.TruncPart)
}

// New returns the training task o asks for: gradient caching when o.MiniBatch > 0 (its chunks
// padded to their own buckets when o.Dynamic), else length-bucketed graphs when o.Dynamic, else
// the one fixed-shape graph.
func New(m *model.BiEncoder, tok *tokenize.Tokenizer, o TaskOptions) (Task, error) {
	switch {
	case o.MiniBatch > 0:
		return NewCachedBiTask(m, tok, o)
	case o.Dynamic:
		return NewBucketedBiTask(m, tok, o)
	}
	return NewBiTask(m, tok, o)
}

// NewBiTask builds the graph of m for o.B queries of o.Lengths.Query tokens and o.N passages of
// o.Lengths.Passage tokens (each side padded to its length; Lengths{L, L} is the one shape of L
// tokens the recipes train), InfoNCE by o.Loss (with a B x N candidate mask when o.Masked);
// o.Next(step) gives each step's batch in text, tok encodes it, and o.Stream XORed into o.Seed
// seeds the step's dropout masks.
func NewBiTask(m *model.BiEncoder, tok *tokenize.Tokenizer, o TaskOptions) (*BiTask, error) {
	lens := o.Lengths
	if lens.Query < 2 || lens.Passage < 2 {
		return nil, fmt.Errorf("bi-encoder task: lengths %d (queries) and %d (passages) leave no room for [CLS] and [SEP]", lens.Query, lens.Passage)
	}
	t := &BiTask{m: m, tok: tok, Len: lens, seed: o.Seed, stream: o.Stream, next: o.Next, B: o.B, N: o.N}
	var err error
	if t.biGraph, err = newBiGraph(m, o.B, o.N, lens, o.Loss, o.Masked); err != nil {
		return nil, err
	}
	return t, nil
}

// nextBatch is the start of every bi-encoder task's Step: the batch of step from next, checked
// against the B x N shape the graphs were built for, and its queries and passages tokenized to
// the lengths l (each side's truncation added to its count).
func nextBatch(next func(step int) (PairBatch, error), tok *tokenize.Tokenizer, step, B, N int, l Lengths,
	qCut, pCut *tokenize.TruncCount) (PairBatch, tokenize.Batch, tokenize.Batch, error) {
	pb, err := next(step)
	if err != nil {
		return pb, tokenize.Batch{}, tokenize.Batch{}, err
	}
	if len(pb.Queries) != B || len(pb.Passages) != N {
		return pb, tokenize.Batch{}, tokenize.Batch{}, fmt.Errorf("batch of %d queries and %d passages, graph built for %d and %d",
			len(pb.Queries), len(pb.Passages), B, N)
	}
	return pb, qCut.Add(tok.EncodeBatch(pb.Queries, l.Query)), pCut.Add(tok.EncodeBatch(pb.Passages, l.Passage)), nil
}

func (t *BiTask) Step(step int) (float64, int, error) {
	pb, qb, pbt, err := nextBatch(t.next, t.tok, step, t.B, t.N, t.Len, &t.qCut, &t.pCut)
	if err != nil {
		return 0, 0, err
	}
	t.lastTru = qb.Truncated + pbt.Truncated
	loss, err := t.run(t.m, t.seed^t.stream, step, pb, qb, pbt)
	return loss, t.B, err
}

// run fills the graph with one batch (the loss head's mask and teacher scores from pb, the
// token ids of q and p, padded to the graph's lengths), draws the step's dropout masks and runs
// the forward and backward pass, returning the loss.
func (g *biGraph) run(m *model.BiEncoder, seed uint64, step int, pb PairBatch, q, p tokenize.Batch) (float64, error) {
	if err := g.head.fill(pb); err != nil {
		return 0, err
	}
	if err := g.qIn.Let(q.IDs, q.Mask, q.Types); err != nil {
		return 0, err
	}
	if err := g.pIn.Let(p.IDs, p.Mask, p.Types); err != nil {
		return 0, err
	}
	// Dropout masks depend on (seed, phase, step) only, so a resumed run draws the same ones.
	m.SetRNG(rand.New(rand.NewPCG(seed, uint64(step))))
	if err := g.Run(); err != nil {
		return 0, err
	}
	return trainer.ScalarValue(g.loss), nil
}

func (t *BiTask) Close() { t.vm.Close() }

// contrastiveHead is the loss end of a bi-encoder graph: the loss over the query embeddings q
// [B,H] and the passage embeddings p [N,H], with the inputs each step fills in (fill).
type contrastiveHead struct {
	loss *gorgonia.Node
	mask *tensor.Dense // B x N additive mask, nil when the loss takes none
	// teacher holds the teacher's scores B x (1+M) of a distillation loss (nil otherwise), times
	// teacherScale.
	teacher      *tensor.Dense
	teacherScale float32
}

// newContrastiveHead adds loss over q and p to g, with a B x N candidate mask when masked (and
// the loss compares every query with every candidate), and the teacher's scores of a
// distillation loss. The mask and the teacher's scores have q's dtype.
func newContrastiveHead(g *gorgonia.ExprGraph, q, p *gorgonia.Node, B, N int, loss ContrastiveLoss, masked bool) (contrastiveHead, error) {
	var h contrastiveHead
	var err error
	dt := q.Dtype()
	in := losses.Inputs{Q: q, P: p, Temperature: loss.Temperature, Similarity: loss.Similarity, Dims: loss.Dims, DimWeights: loss.DimWeights, TeacherTemperature: loss.TeacherTemperature}
	// A distillation loss compares each query with its own candidates only; its InfoNCE term
	// (loss.infonce_weight) compares it with the whole batch's.
	if masked && (!loss.spec.Teacher || loss.InfoNCEWeight > 0) {
		h.mask = tensor.New(tensor.WithShape(B, N), tensor.Of(dt))
		in.Mask = gorgonia.NewMatrix(g, dt, gorgonia.WithShape(B, N), gorgonia.WithValue(h.mask), gorgonia.WithName("candidate_mask"))
	}
	if loss.spec.Teacher {
		if N%B != 0 || N == B {
			return h, fmt.Errorf("bi-encoder task: %s needs each query's hard negatives (N = B(1+M) passages, M >= 1), got B = %d, N = %d", loss.spec.Name, B, N)
		}
		k := N / B
		h.teacher, h.teacherScale = tensor.New(tensor.WithShape(B, k), tensor.Of(dt)), float32(loss.teacherScale())
		in.Teacher = h.teacher
		if loss.spec.Batch == losses.Lists { // the student's list: each query's own candidates
			if in.Scores, err = losses.CandidateScores(q, p, k-1, loss.Similarity); err != nil {
				return h, err
			}
			in.B, in.K = B, k
		}
	}
	if h.loss, err = loss.spec.Build(in); err != nil || !loss.spec.Teacher || loss.InfoNCEWeight == 0 {
		return h, err
	}
	h.loss, err = addInfoNCE(h.loss, in, loss.InfoNCEWeight)
	return h, err
}

// addInfoNCE returns distill + w * InfoNCE(in.Q, in.P, in.Mask) at in.Temperature and in.Similarity: the
// labels' term beside a distillation loss (loss.infonce_weight), both scalars of q's dtype.
func addInfoNCE(distill *gorgonia.Node, in losses.Inputs, w float64) (*gorgonia.Node, error) {
	nce, err := infoNCE(in.Temperature, in.Similarity)
	if err != nil {
		return nil, err
	}
	term, err := nce.spec.Build(losses.Inputs{Q: in.Q, P: in.P, Mask: in.Mask, Temperature: in.Temperature, Similarity: in.Similarity})
	if err != nil {
		return nil, err
	}
	var c *gorgonia.Node
	if distill.Dtype() == tensor.Float32 {
		c = gorgonia.NewConstant(float32(w), gorgonia.WithName("infonce_weight"))
	} else {
		c = gorgonia.NewConstant(w, gorgonia.WithName("infonce_weight"))
	}
	if term, err = gorgonia.Mul(c, term); err != nil {
		return nil, fmt.Errorf("loss.infonce_weight: %w", err)
	}
	sum, err := gorgonia.Add(distill, term)
	if err != nil {
		return nil, fmt.Errorf("loss.infonce_weight: %w", err)
	}
	return sum, nil
}

// fill copies the batch's candidate mask (-Inf where pb.Mask is 0) and teacher scores into the
// head's inputs.
func (h *contrastiveHead) fill(pb PairBatch) error {
	if h.mask != nil {
		if len(pb.Mask) != h.mask.Len() {
			return fmt.Errorf("candidate mask of %d values, want %d", len(pb.Mask), h.mask.Len())
		}
		switch m := h.mask.Data().(type) {
		case []float32:
			for i, keep := range pb.Mask {
				m[i] = 0
				if keep == 0 {
					m[i] = float32(math.Inf(-1))
				}
			}
		case []float64:
			for i, keep := range pb.Mask {
				m[i] = 0
				if keep == 0 {
					m[i] = math.Inf(-1)
				}
			}
		}
	}
	if h.teacher != nil {
		if len(pb.Teacher) != h.teacher.Len() {
			return fmt.Errorf("teacher scores: %d values, want %d (B x (1+M))", len(pb.Teacher), h.teacher.Len())
		}
		switch ts := h.teacher.Data().(type) {
		case []float32:
			for i, v := range pb.Teacher {
				ts[i] = v * h.teacherScale
			}
		case []float64:
			for i, v := range pb.Teacher {
				ts[i] = float64(v * h.teacherScale)
			}
		}
	}
	return nil
}

// Truncation reports what truncation cut of the queries (to Len.Query) and of the passages (to
// Len.Passage) over the steps run.
func (t *BiTask) Truncation() (int, []tokenize.TruncPart) {
	return t.Len.Query, []tokenize.TruncPart{
		{Name: "queries", Count: &t.qCut, L: t.Len.Query},
		{Name: "passages", Count: &t.pCut, L: t.Len.Passage},
	}
}

// ContrastiveLoss is a bi-encoder's loss: loss.name from the losses table (a contrastive
// one, or a list distillation loss over each query's own candidates), loss.temperature,
// loss.similarity, loss.dims / loss.dim_weights (matryoshka_infonce) and
// loss.teacher_temperature (distillation), parsed once per run.
type ContrastiveLoss struct {
	spec               losses.Spec
	Temperature        float64
	Similarity         losses.Similarity
	Dims               []int     // prefixes of a Matryoshka loss, nil otherwise
	DimWeights         []float64 // their weights, nil for all 1
	TeacherTemperature float64   // the teacher's temperature of a distillation loss
	// InfoNCEWeight is the weight of the InfoNCE term added to a distillation loss
	// (loss.infonce_weight; 0: none).
	InfoNCEWeight float64
}

// NewContrastiveLoss reads the recipe's [loss]: a bi-encoder trains a contrastive loss, or a list
// loss that distils a teacher (kl_distill: each query's positive and hard negatives are its list).
func NewContrastiveLoss(rec *configs.Recipe) (ContrastiveLoss, error) {
	spec, err := losses.Lookup(rec.Loss.Name)
	if err != nil {
		return ContrastiveLoss{}, fmt.Errorf("loss.name: %w", err)
	}
	if spec.Batch != losses.Contrastive && !(spec.Batch == losses.Lists && spec.Teacher) {
		return ContrastiveLoss{}, fmt.Errorf("loss.name = %q: a %s loss, but a bi-encoder trains a %s one (%s); list losses train cross-encoders (kind = \"reranker\", rerank.losses)",
			rec.Loss.Name, spec.Batch, losses.Contrastive, strings.Join(losses.Names(losses.Contrastive), ", "))
	}
	sim, err := losses.ParseSimilarity(rec.Loss.Similarity)
	if err != nil {
		return ContrastiveLoss{}, fmt.Errorf("loss.similarity: %w", err)
	}
	l := ContrastiveLoss{spec: spec, Temperature: rec.Loss.Temperature, Similarity: sim}
	if len(rec.Loss.Dims) > 0 {
		l.Dims = slices.Clone(rec.Loss.Dims)
	}
	if len(rec.Loss.DimWeights) > 0 {
		l.DimWeights = slices.Clone(rec.Loss.DimWeights)
	}
	if spec.Teacher {
		l.TeacherTemperature = rec.Loss.TeacherTemperature
		l.InfoNCEWeight = rec.Loss.InfoNCEWeight
	}
	return l, nil
}

// infoNCE is the losses table's InfoNCE with temperature tau and similarity sim.
func infoNCE(tau float64, sim losses.Similarity) (ContrastiveLoss, error) {
	spec, err := losses.Lookup("infonce")
	return ContrastiveLoss{spec: spec, Temperature: tau, Similarity: sim}, err
}

// Cosine reports whether the loss compares L2-normalised embeddings (the index then holds
// normalised rows).
func (l ContrastiveLoss) Cosine() bool { return l.Similarity == losses.Cosine }

// Name is the loss's name in the losses table.
func (l ContrastiveLoss) Name() string { return l.spec.Name }

// Teacher reports whether the loss distils a teacher: its batches carry PairBatch.Teacher.
func (l ContrastiveLoss) Teacher() bool { return l.spec.Teacher }

// Unsupervised is the loss of a phase without labels or teacher (independent cropping): the loss
// itself, or InfoNCE at its temperature and similarity for a distillation loss (crops have no
// teacher scores).
func (l ContrastiveLoss) Unsupervised() (ContrastiveLoss, error) {
	if !l.spec.Teacher {
		return l, nil
	}
	return infoNCE(l.Temperature, l.Similarity)
}

// teacherScale is the factor on the teacher's scores fed to the loss: for a contrastive
// distillation loss (margin_mse, which compares raw margins) Temperature / TeacherTemperature, so that the
// student's margin meets the teacher's in softmax units; 1 for a list loss, whose builder divides
// by both temperatures itself.
func (l ContrastiveLoss) teacherScale() float64 {
	if l.spec.Batch == losses.Lists {
		return 1
	}
	return l.Temperature / l.TeacherTemperature
}
