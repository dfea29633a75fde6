package gradcache

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// Build adds an encoder's output for a chunk's inputs to b's graph, dropout on: [M, H] pooled
// vectors or [M, L, Dim] token vectors.
type Build func(b *model.Binder, in *model.Inputs) (*gorgonia.Node, error)

// Chunk is the pair of graphs of M rows of L tokens: forward-only (pass 1) and training (pass
// 3). FwdIn and TrIn are their inputs.
type Chunk struct {
	L           int
	FwdIn, TrIn *model.Inputs
	fwdVM, trVM gorgonia.VM
	fwd, tr     *gorgonia.Node // the encoder's output, [M, ...]
	up          *tensor.Dense  // the chunk's rows of the cached gradient dL/dE, tr's shape
	bound       []model.Bound
}

// NewChunk builds the graphs of M rows of L tokens of dtype dt (the inputs named name). With
// share, the graphs' ops share their buffers (model.ShareBuffers: the same values, less memory).
func NewChunk(build Build, dt tensor.Dtype, M, L int, name string, share bool) (*Chunk, error) {
	c := &Chunk{L: L}
	g := gorgonia.NewGraph()
	c.FwdIn = model.NewInputsOf(g, M, L, name, dt)
	var err error
	if c.fwd, err = build(model.NewBinder(g), c.FwdIn); err != nil {
		return nil, err
	}
	// Only the output is read after a run: the activations lend their buffers once consumed.
	if share {
		model.ShareBuffers(g, c.fwd)
	}
	c.fwdVM = gorgonia.NewTapeMachine(g)

	g = gorgonia.NewGraph()
	b := model.NewBinder(g)
	c.TrIn = model.NewInputsOf(g, M, L, name, dt)
	if c.tr, err = build(b, c.TrIn); err != nil {
		return nil, err
	}
	shape := c.tr.Shape().Clone()
	if !shape.Eq(c.fwd.Shape()) || len(shape) < 2 || shape[0] != M {
		return nil, fmt.Errorf("gradient graph of %s: outputs of shape %v and %v, want the same [%d, ...]", name, c.fwd.Shape(), shape, M)
	}
	c.up = tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
	up := gorgonia.NewTensor(g, dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithValue(c.up), gorgonia.WithName(name+".cached_grad"))
	prod, err := gorgonia.HadamardProd(c.tr, up)
	if err != nil {
		return nil, err
	}
	surrogate, err := gorgonia.Sum(prod)
	if err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(surrogate, b.Nodes()...); err != nil {
		return nil, fmt.Errorf("gradient graph of %s: %w", name, err)
	}
	// Read after a run: the re-forward's output (checked against the cached one) and the
	// parameters' gradients.
	if share {
		model.ShareBuffers(g, c.tr)
	}
	c.trVM = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))
	c.bound = b.Bound()
	return c, nil
}

// Bound is the parameters the training graph binds, with their gradient nodes.
func (c *Chunk) Bound() []model.Bound { return c.bound }

// Close releases the two machines.
func (c *Chunk) Close() {
	c.fwdVM.Close()
	c.trVM.Close()
}

// Input returns a node of g holding a zero tensor of shape and dtype dt: a side's cached vectors
// in the loss graph.
func Input(g *gorgonia.ExprGraph, dt tensor.Dtype, name string, shape ...int) *gorgonia.Node {
	return gorgonia.NewTensor(g, dt, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(name),
		gorgonia.WithValue(tensor.New(tensor.WithShape(shape...), tensor.Of(dt))))
}

// Cache is the loss graph of pass 2 and the summed parameter gradients of a step.
type Cache struct {
	M      int
	loss   *gorgonia.Node
	lossVM gorgonia.VM
	acc    map[*model.Param]*tensor.Dense // the summed gradients, the parameters' dtype
	order  []*model.Param
	params []trainer.Param // the float32 parameters, Grad the sums
}

// New returns the cache of chunks of M rows: loss is a scalar node over the inputs (Input) that
// hold the sides' vectors, and the gradients summed are those of the parameters bound (first
// seen first; the order of Params).
func New(M int, loss *gorgonia.Node, inputs []*gorgonia.Node, bound ...[]model.Bound) (*Cache, error) {
	if _, err := gorgonia.Grad(loss, inputs...); err != nil {
		return nil, fmt.Errorf("gradient graph of the cached loss: %w", err)
	}
	k := &Cache{M: M, loss: loss, lossVM: gorgonia.NewTapeMachine(loss.Graph(), gorgonia.BindDualValues(inputs...)), acc: map[*model.Param]*tensor.Dense{}}
	// One sum per parameter, however many graphs bind it (shared towers: two).
	for _, bs := range bound {
		for _, bd := range bs {
			if _, ok := k.acc[bd.Param]; ok {
				continue
			}
			k.acc[bd.Param] = tensor.New(tensor.WithShape(bd.Param.Value.Shape().Clone()...), tensor.Of(bd.Param.Value.Dtype()))
			k.order = append(k.order, bd.Param)
		}
	}
	for _, p := range k.order {
		if g, ok := k.acc[p].Data().([]float32); ok {
			k.params = append(k.params, trainer.Param{Name: p.Name, Value: p.Value.Data().([]float32), Grad: g})
		}
	}
	return k, nil
}

// Side is one side of a step (the queries or the passages).
type Side struct {
	Name string
	// Emb is the loss graph's input of the side's vectors, [Rows, ...]; a chunk's output fills
	// rows [c*M, (c+1)*M) (its first positions along the second axis, when it has three).
	Emb  *gorgonia.Node
	Rows int
	// Chunk returns the graphs chunk c runs on and its tokens (rows [c*M, (c+1)*M) of the side's
	// batch, padded to the graphs' L).
	Chunk func(c int) (*Chunk, tokenize.Batch, error)
	// Seed and SetRNG seed dropout for a chunk: SetRNG gets a PCG of (Seed, step<<24 | c).
	Seed   uint64
	SetRNG func(*rand.Rand)
}

// feed returns chunk c of s with its tokens in the forward (train false) or training inputs
// and dropout seeded for it.
func (s Side) feed(step, c int, train bool) (*Chunk, error) {
	g, b, err := s.Chunk(c)
	if err != nil {
		return nil, err
	}
	in := g.FwdIn
	if train {
		in = g.TrIn
	}
	if err := in.Let(b.IDs, b.Mask, b.Types); err != nil {
		return nil, err
	}
	s.SetRNG(rand.New(rand.NewPCG(s.Seed, uint64(step)<<24|uint64(c))))
	return g, nil
}

// Step runs the three passes of step over the sides (the loss graph's other inputs filled
// already) and returns the loss; the batch's gradient is then in Params.
func (k *Cache) Step(step int, sides ...Side) (float64, error) {
	defer k.lossVM.Reset()
	// Pass 1: the vectors, without gradients.
	for _, s := range sides {
		for c := 0; c < s.Rows/k.M; c++ {
			g, err := s.feed(step, c, false)
			if err != nil {
				return 0, err
			}
			err = g.fwdVM.RunAll()
			if err == nil {
				copyChunk(g.fwd.Value().(*tensor.Dense), s.Emb.Value().(*tensor.Dense), c*k.M, true)
			}
			g.fwdVM.Reset()
			if err != nil {
				return 0, err
			}
		}
	}
	// Pass 2: the loss and its gradient with respect to every vector.
	if err := k.lossVM.RunAll(); err != nil {
		return 0, err
	}
	loss := trainer.ScalarValue(k.loss)
	// Pass 3: each chunk again, back-propagating its rows of the cached gradient.
	for _, s := range sides {
		gv, err := s.Emb.Grad()
		if err != nil {
			return 0, fmt.Errorf("gradient of the cached %s vectors: %w", s.Name, err)
		}
		grad := gv.(*tensor.Dense)
		for c := 0; c < s.Rows/k.M; c++ {
			g, err := s.feed(step, c, true)
			if err != nil {
				return 0, err
			}
			copyChunk(g.up, grad, c*k.M, false)
			err = k.replay(g, s, step, c)
			g.trVM.Reset()
			if err != nil {
				return 0, err
			}
		}
		grad.Zero()
	}
	return loss, nil
}

// replay runs chunk c's training graph, checks its output against the cached one and adds its
// parameter gradients to the sums (zeroing them).
func (k *Cache) replay(g *Chunk, s Side, step, c int) error {
	if err := g.trVM.RunAll(); err != nil {
		return err
	}
	if r := firstDiffRow(g.tr.Value().(*tensor.Dense), s.Emb.Value().(*tensor.Dense), c*k.M); r >= 0 {
		return fmt.Errorf("step %d: the re-forward of %s row %d differs from its cached vectors (dropout masks not replayed?)", step, s.Name, c*k.M+r)
	}
	for _, bd := range g.bound {
		a := k.acc[bd.Param]
		if a == nil {
			return fmt.Errorf("the %d-token %s chunk graph binds %s, which the first graphs did not", g.L, s.Name, bd.Param.Name)
		}
		gv, err := bd.Node.Grad()
		if err != nil {
			return fmt.Errorf("gradient of %s: %w", bd.Param.Name, err)
		}
		pg := gv.(*tensor.Dense)
		switch d := a.Data().(type) {
		case []float32:
			addTo(d, pg.Data().([]float32))
		case []float64:
			addTo(d, pg.Data().([]float64))
		}
		pg.Zero()
	}
	return nil
}

func addTo[T float32 | float64](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

// Params are the float32 parameters with the summed gradients of the last step (none for a
// float64 model).
func (k *Cache) Params() []trainer.Param { return k.params }

// Sum is the summed gradient of p over the last step (nil when no graph binds p).
func (k *Cache) Sum(p *model.Param) *tensor.Dense { return k.acc[p] }

// Gradient is the summed gradient of the parameter named name, as float64 (nil when none).
func (k *Cache) Gradient(name string) []float64 {
	i := slices.IndexFunc(k.order, func(p *model.Param) bool { return p.Name == name })
	if i < 0 {
		return nil
	}
	return model.Float64s(k.acc[k.order[i]])
}

// AfterUpdate zeroes the summed gradients.
func (k *Cache) AfterUpdate() {
	for _, a := range k.acc {
		a.Zero()
	}
}

// Close releases the loss graph's machine (the chunks are their owners').
func (k *Cache) Close() { k.lossVM.Close() }

// A side's vectors are [rows, H] or [rows, L, D]; a chunk's [M, H] or [M, Lc, D] hold rows
// at..at+M-1 of the side's, cut to their first Lc <= L positions. [rows, H] reads as
// [rows, 1, H].
func dims(s tensor.Shape) (rows, L, D int) {
	if len(s) == 2 {
		return s[0], 1, s[1]
	}
	return s[0], s[1], s[2]
}

// copyChunk copies the chunk's positions of rows at.. between the side's tensor and the chunk's:
// into the side's (positions Lc.. of its rows set to 0) when toBatch, else into the chunk's.
func copyChunk(chunk, batch *tensor.Dense, at int, toBatch bool) {
	switch c := chunk.Data().(type) {
	case []float32:
		copyRows(c, batch.Data().([]float32), at, chunk.Shape(), batch.Shape(), toBatch)
	case []float64:
		copyRows(c, batch.Data().([]float64), at, chunk.Shape(), batch.Shape(), toBatch)
	}
}

func copyRows[T float32 | float64](chunk, batch []T, at int, cs, bs tensor.Shape, toBatch bool) {
	M, Lc, D := dims(cs)
	_, L, _ := dims(bs)
	for r := range M {
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
	M, Lc, D := dims(a.Shape())
	_, L, _ := dims(b.Shape())
	for r := range M {
		for i, v := range x[r*Lc*D : (r+1)*Lc*D] {
			if v != y[(at+r)*L*D+i] {
				return r
			}
		}
	}
	return -1
}
