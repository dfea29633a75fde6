package colbert

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// CachedTask trains a ColBERT model on Task's batch (B queries, N passages, the same loss over
// the whole batch) with the memory of M-row graphs: gradient caching (GradCache; Gao et al.
// 2021, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"; PyLate 1.6's
// losses.CachedContrastive, its mini_batch_size; here for colbert_kl_distill too),
// train.mini_batch_size = M. Each step
//
//  1. encodes the queries and the passages M rows at a time with forward-only graphs, keeping
//     only the projected token vectors Q [B,Lq,Dim] and P [N,Ld,Dim] (Lq = QueryLength, Ld =
//     DocumentLength; not normalised: the loss normalises, as in Task);
//  2. computes the loss over Q and P (MaxSim from the token matrices, the passages' scored
//     tokens masked as in Task) and its gradients G_Q = dL/dQ, G_P = dL/dP in a graph whose
//     inputs are those token vectors;
//  3. runs each M-row chunk again through a training graph whose loss is sum(T_chunk ⊙
//     G_chunk) over its token vectors T, whose parameter gradients are the chunk's share of
//     dL/dθ by the chain rule, and sums them.
//
// The optimizer then takes one step on the sum, the full batch's gradient. Dropout draws each
// chunk's masks from a PCG seeded with (seed, side, step, chunk), the same in steps 1 and 3, so
// the re-forward reproduces the cached token vectors bit for bit (Step fails otherwise); the
// masks differ from Task's (drawn over the whole batch), so without dropout the two tasks'
// gradients agree to rounding and with dropout they train the same objective under other
// masks.
//
// With Dynamic (train.dynamic_padding), each passage chunk is padded only to BucketLen of its
// longest passage and runs through that length's pair of graphs (built the first time the
// length is seen, kept for the task's life: at most ceil(DocumentLength/PadMultiple) lengths
// besides QueryLength, 6 pairs at 180 and 32, each training graph holding one gradient per
// parameter, 91 MB for MiniLM); its token vectors fill the first positions of its rows of P,
// the rest 0 and unscored, so the loss is Task's. Queries are always QueryLength tokens (every one
// scored); a bucket of QueryLength shares the queries' graphs.
type CachedTask struct {
	source
	o      TaskOptions
	M      int
	chunks map[int]*chunkGraphs // by length
	built  int
	lossVM gorgonia.VM
	q, p   *gorgonia.Node // the cached token vectors [B,Lq,Dim], [N,Ld,Dim]
	head   head
	acc    map[*model.Param]*tensor.Dense // the summed gradients (the model's dtype)
	order  []*model.Param
	params []trainer.Param // float32 models
}

// Salts of the two sides' dropout streams, XORed into the seed.
const (
	saltQuery   = 0x636371756572793a // "ccquery:"
	saltPassage = 0x636370617373673a // "ccpassg:"
)

// chunkGraphs are the forward-only (step 1) and training (step 3) graphs of M rows of L tokens.
type chunkGraphs struct {
	L           int
	fwdVM, trVM gorgonia.VM
	fwdIn, trIn *model.Inputs
	fwd, tr     *gorgonia.Node // [M,L,Dim]
	up          *tensor.Dense  // [M,L,Dim]: the cached dL/dT of the chunk
	bound       []model.Bound
}

func newChunkGraphs(m *Model, M, L int) (*chunkGraphs, error) {
	c := &chunkGraphs{L: L}
	dt := m.Proj.Value.Dtype()
	name := fmt.Sprintf("chunk%d", L)
	g := gorgonia.NewGraph()
	c.fwdIn = model.NewInputsOf(g, M, L, name, dt)
	var err error
	if c.fwd, err = m.BuildTokens(model.NewBinder(g), c.fwdIn, true); err != nil {
		return nil, err
	}
	model.ShareBuffers(g, c.fwd) // only the token vectors are read after a run
	c.fwdVM = gorgonia.NewTapeMachine(g)

	g = gorgonia.NewGraph()
	b := model.NewBinder(g)
	c.trIn = model.NewInputsOf(g, M, L, name, dt)
	if c.tr, err = m.BuildTokens(b, c.trIn, true); err != nil {
		return nil, err
	}
	c.up = tensor.New(tensor.WithShape(M, L, m.Cfg.Dim), tensor.Of(dt))
	up := gorgonia.NewTensor(g, dt, 3, gorgonia.WithShape(M, L, m.Cfg.Dim), gorgonia.WithValue(c.up), gorgonia.WithName(name+".cached_grad"))
	prod, err := gorgonia.HadamardProd(c.tr, up)
	if err != nil {
		return nil, err
	}
	surrogate, err := gorgonia.Sum(prod)
	if err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(surrogate, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("colbert: gradient graph of %d-token chunks: %w", L, err)
	}
	model.ShareBuffers(g, c.tr) // read after a run: the token vectors and the gradients
	c.trVM = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))
	c.bound = b.Bound()
	return c, nil
}

func (c *chunkGraphs) close() {
	c.fwdVM.Close()
	c.trVM.Close()
}

// NewCachedTask is NewTask with gradient caching over chunks of M = o.MiniBatch rows (M divides
// o.B and o.N); with o.Dynamic each passage chunk is padded to its own bucket. The model may be
// float64 (tests; Params is then empty).
func NewCachedTask(m *Model, tok *tokenize.Tokenizer, o TaskOptions) (*CachedTask, error) {
	src, err := newSource(m, tok, o.B, o.N, o.Next)
	if err != nil {
		return nil, err
	}
	spec, err := lossSpec(o.Loss, o.B, o.N)
	if err != nil {
		return nil, err
	}
	M := o.MiniBatch
	if M < 1 || o.B%M != 0 || o.N%M != 0 {
		return nil, fmt.Errorf("colbert: mini-batches of %d rows do not divide %d queries and %d passages", M, o.B, o.N)
	}
	t := &CachedTask{source: src, o: o, M: M, chunks: map[int]*chunkGraphs{}, acc: map[*model.Param]*tensor.Dense{}}
	for _, L := range []int{m.Cfg.QueryLength, m.Cfg.DocumentLength} {
		if _, err := t.graphs(L); err != nil {
			return nil, err
		}
	}
	t.built = 0
	dt, D := m.Proj.Value.Dtype(), m.Cfg.Dim
	g := gorgonia.NewGraph()
	value := func(rows, L int, name string) *gorgonia.Node {
		return gorgonia.NewTensor(g, dt, 3, gorgonia.WithShape(rows, L, D), gorgonia.WithName(name),
			gorgonia.WithValue(tensor.New(tensor.WithShape(rows, L, D), tensor.Of(dt))))
	}
	t.q, t.p = value(o.B, m.Cfg.QueryLength, "Q"), value(o.N, m.Cfg.DocumentLength, "P")
	if t.head, err = newHead(g, t.q, t.p, o.Loss, spec); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.head.Loss, t.q, t.p); err != nil {
		return nil, fmt.Errorf("colbert: gradient graph of the cached loss: %w", err)
	}
	t.lossVM = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(t.q, t.p))
	for _, bd := range t.chunks[m.Cfg.QueryLength].bound {
		if _, ok := t.acc[bd.Param]; !ok {
			t.acc[bd.Param] = tensor.New(tensor.WithShape(bd.Param.Value.Shape().Clone()...), tensor.Of(dt))
			t.order = append(t.order, bd.Param)
		}
	}
	if dt == tensor.Float32 {
		for _, p := range t.order {
			t.params = append(t.params, trainer.Param{Name: p.Name, Value: p.Value.Data().([]float32), Grad: t.acc[p].Data().([]float32)})
		}
	}
	return t, nil
}

// graphs returns the chunk graphs of length L, building them the first time.
func (t *CachedTask) graphs(L int) (*chunkGraphs, error) {
	if c := t.chunks[L]; c != nil {
		return c, nil
	}
	c, err := newChunkGraphs(t.m, t.M, L)
	if err != nil {
		return nil, err
	}
	t.chunks[L] = c
	t.built++
	return c, nil
}

// Built is the number of chunk-graph pairs built beyond those of QueryLength and
// DocumentLength (Dynamic: one per other passage bucket seen).
func (t *CachedTask) Built() int { return t.built }

// Step encodes step's batch as Task does and runs the three passes on it, leaving the batch's
// gradient in Params.
func (t *CachedTask) Step(step int) (float64, int, error) {
	b, q, p, err := t.batch(step)
	if err != nil {
		return 0, 0, err
	}
	return t.stepEncoded(step, b, q, p)
}

// cachedSide is one side of a step: its name, its encoded texts, the loss graph's node of its token
// vectors, its dropout salt, whether its chunks take their own buckets.
type cachedSide struct {
	name   string
	enc    Encoded
	node   *gorgonia.Node
	salt   uint64
	bucket bool
}

// eachChunk runs f on every chunk of side s: its graphs, after the chunk is fed to the inputs
// in(g) picks and dropout is seeded for (step, side, chunk), and its first row.
func (t *CachedTask) eachChunk(s cachedSide, step int, in func(*chunkGraphs) *model.Inputs, f func(g *chunkGraphs, at int) error) error {
	for c := 0; c < s.enc.B/t.M; c++ {
		e := s.enc.rows(c*t.M, (c+1)*t.M)
		if s.bucket {
			e = cutEncoded(e, BucketLen(longest(e), e.L))
		}
		g, err := t.graphs(e.L)
		if err != nil {
			return err
		}
		if err := in(g).Let(e.IDs, e.Mask, e.Types); err != nil {
			return err
		}
		t.m.Enc.SetRNG(rand.New(rand.NewPCG(t.o.Seed^s.salt, uint64(step)<<24|uint64(c))))
		if err := f(g, c*t.M); err != nil {
			return err
		}
	}
	return nil
}

func (t *CachedTask) stepEncoded(step int, b Batch, q, p Encoded) (float64, int, error) {
	if err := t.head.fill(b, p.Score); err != nil {
		return 0, 0, err
	}
	sides := []cachedSide{{"query", q, t.q, saltQuery, false}, {"passage", p, t.p, saltPassage, t.o.Dynamic}}
	// Step 1: the token vectors, without gradients.
	for _, s := range sides {
		err := t.eachChunk(s, step, func(g *chunkGraphs) *model.Inputs { return g.fwdIn }, func(g *chunkGraphs, at int) error {
			defer g.fwdVM.Reset()
			if err := g.fwdVM.RunAll(); err != nil {
				return err
			}
			copyChunk(g.fwd.Value().(*tensor.Dense), s.node.Value().(*tensor.Dense), at, true)
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
	}
	// Step 2: the loss and its gradient with respect to every token vector.
	if err := t.lossVM.RunAll(); err != nil {
		return 0, 0, err
	}
	defer t.lossVM.Reset()
	loss := trainer.ScalarValue(t.head.Loss)
	// Step 3: each chunk again, back-propagating its rows of the cached gradient.
	for _, s := range sides {
		gv, err := s.node.Grad()
		if err != nil {
			return 0, 0, fmt.Errorf("colbert: gradient of the cached token vectors: %w", err)
		}
		grad := gv.(*tensor.Dense)
		err = t.eachChunk(s, step, func(g *chunkGraphs) *model.Inputs { return g.trIn }, func(g *chunkGraphs, at int) error {
			defer g.trVM.Reset()
			copyChunk(g.up, grad, at, false)
			if err := g.trVM.RunAll(); err != nil {
				return err
			}
			if r := firstDiffRow(g.tr.Value().(*tensor.Dense), s.node.Value().(*tensor.Dense), at); r >= 0 {
				return fmt.Errorf("colbert: cached task: step %d: the re-forward of %s row %d differs from its cached token vectors (dropout masks not replayed?)", step, s.name, at+r)
			}
			return t.accumulate(g)
		})
		if err != nil {
			return 0, 0, err
		}
		grad.Zero()
	}
	return loss, t.o.B, nil
}

// accumulate adds the parameter gradients of g's last run to the step's sums and zeroes them.
func (t *CachedTask) accumulate(g *chunkGraphs) error {
	for _, bd := range g.bound {
		a := t.acc[bd.Param]
		if a == nil {
			return fmt.Errorf("colbert: cached task: the %d-token chunk graph binds %s, which the first graphs did not", g.L, bd.Param.Name)
		}
		pg, err := bd.Node.Grad()
		if err == nil {
			_, err = a.Add(pg.(*tensor.Dense), tensor.UseUnsafe())
		}
		if err != nil {
			return fmt.Errorf("colbert: gradient of %s: %w", bd.Param.Name, err)
		}
		pg.(*tensor.Dense).Zero()
	}
	return nil
}

// Params are the parameters with the summed gradients of the last step (float32 models).
func (t *CachedTask) Params() []trainer.Param { return t.params }

// AfterUpdate zeroes the summed gradients.
func (t *CachedTask) AfterUpdate() {
	for _, a := range t.acc {
		a.Zero()
	}
}

// Close releases the machines.
func (t *CachedTask) Close() {
	for _, c := range t.chunks {
		c.close()
	}
	t.lossVM.Close()
}

// The token-vector tensors are [rows, L, Dim]; a chunk's [M, Lc, Dim] holds rows at..at+M-1 of
// the batch's, cut to their first Lc <= L positions.

// copyChunk copies the chunk's positions of rows at.. between the batch tensor and the chunk:
// into the batch (positions Lc.. of its rows set to 0) when toBatch, else into the chunk.
func copyChunk(chunk, batch *tensor.Dense, at int, toBatch bool) {
	switch c := chunk.Data().(type) {
	case []float32:
		copyRows(c, batch.Data().([]float32), at, chunk.Shape(), batch.Shape(), toBatch)
	case []float64:
		copyRows(c, batch.Data().([]float64), at, chunk.Shape(), batch.Shape(), toBatch)
	}
}

func copyRows[T float32 | float64](chunk, batch []T, at int, cs, bs tensor.Shape, toBatch bool) {
	L, Lc, D := bs[1], cs[1], cs[2]
	for r := range cs[0] {
		row, part := batch[(at+r)*L*D:(at+r+1)*L*D], chunk[r*Lc*D:(r+1)*Lc*D]
		if toBatch {
			copy(row, part)
			clear(row[Lc*D:])
		} else {
			copy(part, row)
		}
	}
}

// firstDiffRow returns the first row r of the chunk a that differs from row at+r of b (its
// first positions), or -1.
func firstDiffRow(a, b *tensor.Dense, at int) int {
	x, y := model.Float64s(a), model.Float64s(b)
	Lc, D, L := a.Shape()[1], a.Shape()[2], b.Shape()[1]
	for r := range a.Shape()[0] {
		for i, v := range x[r*Lc*D : (r+1)*Lc*D] {
			if v != y[(at+r)*L*D+i] {
				return r
			}
		}
	}
	return -1
}
