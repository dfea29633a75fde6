package biencoder

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// CachedBiTask trains a bi-encoder on the batch of BiTask (B queries, N passages, the same loss
// over the whole B x N score matrix) with the memory of M-row graphs: gradient caching
// (GradCache; Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory
// Limited Setup"; sentence-transformers' CachedMultipleNegativesRankingLoss). Each step
//
//  1. encodes the queries and the passages M rows at a time with forward-only graphs, keeping
//     only the embeddings Q [B,H] and P [N,H];
//  2. computes the loss over Q and P and its gradients G_Q = dL/dQ, G_P = dL/dP in a graph whose
//     inputs are those embeddings;
//  3. runs each M-row chunk again through a training graph whose loss is sum(E_chunk ⊙ G_chunk),
//     whose parameter gradients are the chunk's share of dL/dθ by the chain rule, and sums them.
//
// The optimizer then takes one step on the sum, the gradient of the full batch. Dropout draws each
// chunk's masks from a PCG seeded with (seed, phase, step, tower side, chunk), the same in steps 1
// and 3, so the re-forward reproduces the cached embeddings bit for bit (Step fails otherwise).
// The masks differ from BiTask's (drawn over the whole batch), so with dropout the two tasks
// train the same objective under different masks; without dropout their gradients agree to
// rounding.
//
// With Dynamic (train.dynamic_padding), each chunk is padded only to PaddedLen of its longest
// sequence instead of to its side's length, and runs through that length's pair of M-row graphs,
// built the first time the length is seen and kept for the task's life: at most
// ceil(Len/PadMultiple) pairs a side (8 at L 256), together M·Σ L padded tokens (for L 256,
// 32 + 64 + ... + 256 = 4.5 times the one M x 256 pair's). The gradients are those of fixed
// padding to float32 rounding; the dropout masks depend on the chunk's length too, so a step's
// numbers are a function of (seed, phase, step, batch) as without Dynamic.
type CachedBiTask struct {
	m            *model.BiEncoder
	tok          *tokenize.Tokenizer
	Len          Lengths
	seed, stream uint64
	next         func(step int) (PairBatch, error)
	B, N, M      int
	query, pass  *cachedSide
	// Dynamic pads each chunk to its own length bucket; set it before the first Step.
	Dynamic bool
	// buckets holds the graphs of the other chunk lengths (Dynamic), by side (0 queries, 1
	// passages) and length.
	buckets [2]map[int]*cachedSide
	built   int
	// The loss graph of step 2: its inputs Q and P hold the embeddings of step 1.
	lossVM     gorgonia.VM
	qEmb, pEmb *gorgonia.Node
	head       contrastiveHead
	// acc holds the summed gradient of each parameter (float32 or float64 like the model);
	// params points the trainer at the float32 ones.
	acc     map[*model.Param]*tensor.Dense
	order   []*model.Param
	params  []trainer.Param
	lastTru int
	qCut    tokenize.TruncCount
	pCut    tokenize.TruncCount
}

// Salts of the dropout streams of the two sides, XORed into the step's seed.
const (
	saltQuery   = 0x6763717565727921 // "gcquery!"
	saltPassage = 0x6763706173736167 // "gcpassag"
)

// shareCachedBuffers: the chunk graphs share their buffers (model.ShareBuffers). Off only in
// the test that checks sharing changes no bit.
var shareCachedBuffers = true

// cachedSide is one tower's pair of M-row graphs: forward-only (step 1) and training (step 3).
type cachedSide struct {
	tower *model.Tower
	L     int
	salt  uint64
	fwdVM gorgonia.VM
	fwdIn *model.Inputs
	fwd   *gorgonia.Node // [M,H]
	trVM  gorgonia.VM
	trIn  *model.Inputs
	tr    *gorgonia.Node // [M,H]
	up    *tensor.Dense  // [M,H]: the cached dL/dE of the chunk
	bound []model.Bound
}

func newCachedSide(t *model.Tower, M, L int, name string, salt uint64) (*cachedSide, error) {
	s := &cachedSide{tower: t, L: L, salt: salt}
	dt := t.Dtype()
	g := gorgonia.NewGraph()
	s.fwdIn = model.NewInputsOf(g, M, L, name, dt)
	var err error
	if s.fwd, err = t.Build(model.NewBinder(g), s.fwdIn, true); err != nil {
		return nil, err
	}
	// Only the embeddings are read after a run: the activations lend their buffers once
	// consumed (bit for bit the same values; a few [M*L, FFN] activations held at a time).
	if shareCachedBuffers {
		model.ShareBuffers(g, s.fwd)
	}
	s.fwdVM = gorgonia.NewTapeMachine(g)

	g = gorgonia.NewGraph()
	b := model.NewBinder(g)
	s.trIn = model.NewInputsOf(g, M, L, name, dt)
	if s.tr, err = t.Build(b, s.trIn, true); err != nil {
		return nil, err
	}
	s.up = tensor.New(tensor.WithShape(M, t.Dim()), tensor.Of(dt))
	up := gorgonia.NewMatrix(g, dt, gorgonia.WithShape(M, t.Dim()), gorgonia.WithValue(s.up), gorgonia.WithName(name+".cached_grad"))
	prod, err := gorgonia.HadamardProd(s.tr, up)
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
	// Read after a run: the re-forward's embeddings (checked against the cached ones) and the
	// parameters' gradients; every other value lends its buffer once consumed.
	if shareCachedBuffers {
		model.ShareBuffers(g, s.tr)
	}
	s.trVM = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))
	s.bound = b.Bound()
	return s, nil
}

func (s *cachedSide) close() {
	s.fwdVM.Close()
	s.trVM.Close()
}

// chunk returns rows [c*M, (c+1)*M) of batch tb (tb.L positions each).
func (t *CachedBiTask) chunk(tb tokenize.Batch, c int) tokenize.Batch {
	lo, hi := c*t.M*tb.L, (c+1)*t.M*tb.L
	cb := tokenize.Batch{B: t.M, L: tb.L, IDs: tb.IDs[lo:hi], Mask: tb.Mask[lo:hi]}
	if tb.Types != nil {
		cb.Types = tb.Types[lo:hi]
	}
	return cb
}

// chunkSide returns chunk c of side k's batch tb (padded to its length bucket with Dynamic) and
// the graphs of its length, building them the first time.
func (t *CachedBiTask) chunkSide(k int, base *cachedSide, tb tokenize.Batch, c int) (*cachedSide, tokenize.Batch, error) {
	cb := t.chunk(tb, c)
	if !t.Dynamic {
		return base, cb, nil
	}
	L := PaddedLen(longest(cb), base.L)
	if L == base.L {
		return base, cb, nil
	}
	s := t.buckets[k][L]
	if s == nil {
		var err error
		if s, err = newCachedSide(base.tower, t.M, L, [2]string{"query", "passage"}[k], base.salt); err != nil {
			return nil, cb, err
		}
		if t.buckets[k] == nil {
			t.buckets[k] = map[int]*cachedSide{}
		}
		t.buckets[k][L] = s
		t.built++
	}
	return s, cut(cb, L), nil
}

// letChunk feeds chunk c (cb, of s.L positions a row) to in and seeds dropout for that chunk.
func (t *CachedBiTask) letChunk(s *cachedSide, in *model.Inputs, cb tokenize.Batch, step, c int) error {
	if err := in.Let(cb.IDs, cb.Mask, cb.Types); err != nil {
		return err
	}
	t.m.SetRNG(rand.New(rand.NewPCG(t.seed^t.stream^s.salt, uint64(step)<<24|uint64(c))))
	return nil
}

// Built is the number of chunk-graph pairs built beyond the two of the maximum lengths
// (Dynamic: one per other chunk length seen).
func (t *CachedBiTask) Built() int { return t.built }

// NewCachedBiTask is NewBiTask with gradient caching over chunks of M = o.MiniBatch rows; M
// must divide o.B and o.N; with o.Dynamic each chunk is padded to its own bucket. The other
// options are those of NewBiTask; tok may be nil when the task is run with StepTokens only.
func NewCachedBiTask(m *model.BiEncoder, tok *tokenize.Tokenizer, o TaskOptions) (*CachedBiTask, error) {
	B, N, M, lens, loss, masked := o.B, o.N, o.MiniBatch, o.Lengths, o.Loss, o.Masked
	if lens.Query < 2 || lens.Passage < 2 {
		return nil, fmt.Errorf("bi-encoder task: lengths %d (queries) and %d (passages) leave no room for [CLS] and [SEP]", lens.Query, lens.Passage)
	}
	if M < 1 || B%M != 0 || N%M != 0 {
		return nil, fmt.Errorf("cached bi-encoder task: mini-batches of %d rows do not divide %d queries and %d passages", M, B, N)
	}
	t := &CachedBiTask{m: m, tok: tok, Len: lens, seed: o.Seed, stream: o.Stream, next: o.Next, B: B, N: N, M: M, Dynamic: o.Dynamic, acc: map[*model.Param]*tensor.Dense{}}
	var err error
	if t.query, err = newCachedSide(m.Query, M, lens.Query, "query", saltQuery); err != nil {
		return nil, err
	}
	if t.pass, err = newCachedSide(m.Passage, M, lens.Passage, "passage", saltPassage); err != nil {
		return nil, err
	}
	dt := m.Query.Dtype()
	g := gorgonia.NewGraph()
	t.qEmb = gorgonia.NewMatrix(g, dt, gorgonia.WithShape(B, m.Query.Dim()), gorgonia.WithName("Q"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(B, m.Query.Dim()), tensor.Of(dt))))
	t.pEmb = gorgonia.NewMatrix(g, dt, gorgonia.WithShape(N, m.Passage.Dim()), gorgonia.WithName("P"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(N, m.Passage.Dim()), tensor.Of(dt))))
	if t.head, err = newContrastiveHead(g, t.qEmb, t.pEmb, B, N, loss, masked); err != nil {
		return nil, err
	}
	if _, err := gorgonia.Grad(t.head.loss, t.qEmb, t.pEmb); err != nil {
		return nil, fmt.Errorf("gradient graph of the cached loss: %w", err)
	}
	t.lossVM = gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(t.qEmb, t.pEmb))
	// One gradient buffer per parameter, however many graphs bind it (shared towers: two).
	for _, s := range []*cachedSide{t.query, t.pass} {
		for _, bd := range s.bound {
			if _, ok := t.acc[bd.Param]; ok {
				continue
			}
			t.acc[bd.Param] = tensor.New(tensor.WithShape(bd.Param.Value.Shape().Clone()...), tensor.Of(bd.Param.Value.Dtype()))
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

// Step runs the three passes on step's batch and leaves the batch's gradient in Params.
func (t *CachedBiTask) Step(step int) (float64, int, error) {
	pb, qb, pbt, err := nextBatch(t.next, t.tok, step, t.B, t.N, t.Len, &t.qCut, &t.pCut)
	if err != nil {
		return 0, 0, err
	}
	t.lastTru = qb.Truncated + pbt.Truncated
	return t.StepTokens(step, pb, qb, pbt)
}

// StepTokens is Step on a batch already tokenized: q holds B sequences of Len.Query tokens,
// p N of Len.Passage; pb supplies the candidate mask and teacher scores the loss reads.
func (t *CachedBiTask) StepTokens(step int, pb PairBatch, q, p tokenize.Batch) (float64, int, error) {
	if err := t.head.fill(pb); err != nil {
		return 0, 0, err
	}
	if len(q.IDs) != t.B*t.Len.Query || len(p.IDs) != t.N*t.Len.Passage {
		return 0, 0, fmt.Errorf("cached bi-encoder task: %d query and %d passage tokens, want %d x %d and %d x %d",
			len(q.IDs), len(p.IDs), t.B, t.Len.Query, t.N, t.Len.Passage)
	}
	sides := []struct {
		s    *cachedSide
		tb   tokenize.Batch
		emb  *gorgonia.Node
		rows int
	}{{t.query, q, t.qEmb, t.B}, {t.pass, p, t.pEmb, t.N}}
	// Step 1: the embeddings, without gradients.
	for k, sd := range sides {
		for c := 0; c < sd.rows/t.M; c++ {
			s, cb, err := t.chunkSide(k, sd.s, sd.tb, c)
			if err != nil {
				return 0, 0, err
			}
			if err := t.letChunk(s, s.fwdIn, cb, step, c); err != nil {
				return 0, 0, err
			}
			if err := s.fwdVM.RunAll(); err != nil {
				return 0, 0, err
			}
			copyRows(sd.emb.Value().(*tensor.Dense), s.fwd.Value().(*tensor.Dense), c*t.M)
			s.fwdVM.Reset()
		}
	}
	// Step 2: the loss and its gradient with respect to every embedding.
	if err := t.lossVM.RunAll(); err != nil {
		return 0, 0, err
	}
	loss := trainer.ScalarValue(t.head.loss)
	// Step 3: each chunk again, back-propagating its rows of the cached gradient.
	for k, sd := range sides {
		g, err := sd.emb.Grad()
		if err != nil {
			return 0, 0, fmt.Errorf("gradient of the cached embeddings: %w", err)
		}
		grad := g.(*tensor.Dense)
		for c := 0; c < sd.rows/t.M; c++ {
			s, cb, err := t.chunkSide(k, sd.s, sd.tb, c)
			if err != nil {
				return 0, 0, err
			}
			if err := t.letChunk(s, s.trIn, cb, step, c); err != nil {
				return 0, 0, err
			}
			sliceRows(s.up, grad, c*t.M)
			if err := s.trVM.RunAll(); err != nil {
				return 0, 0, err
			}
			if r := firstDiffRow(s.tr.Value().(*tensor.Dense), sd.emb.Value().(*tensor.Dense), c*t.M); r >= 0 {
				return 0, 0, fmt.Errorf("cached bi-encoder task: step %d: the re-forward of %s row %d differs from its cached embedding (dropout masks not replayed?)",
					step, s.tower.Prefix, c*t.M+r)
			}
			for _, bd := range s.bound {
				gv, err := bd.Node.Grad()
				if err != nil {
					return 0, 0, fmt.Errorf("gradient of %s: %w", bd.Param.Name, err)
				}
				addDense(t.acc[bd.Param], gv.(*tensor.Dense))
				clearDense(gv.(*tensor.Dense))
			}
			s.trVM.Reset()
		}
		clearDense(grad)
	}
	t.lossVM.Reset()
	return loss, t.B, nil
}

// Params are the parameters with the summed gradients of the last step (float32 models).
func (t *CachedBiTask) Params() []trainer.Param { return t.params }

// AfterUpdate zeroes the summed gradients.
func (t *CachedBiTask) AfterUpdate() {
	for _, a := range t.acc {
		clearDense(a)
	}
}

// gradient returns the summed gradient of the parameter named name, as float64.
func (t *CachedBiTask) gradient(name string) []float64 {
	for _, p := range t.order {
		if p.Name == name {
			return model.Float64s(t.acc[p])
		}
	}
	return nil
}

// Close releases the machines.
func (t *CachedBiTask) Close() {
	t.query.close()
	t.pass.close()
	for _, b := range t.buckets {
		for _, s := range b {
			s.close()
		}
	}
	t.lossVM.Close()
}

// Truncation reports what truncation cut of the queries and of the passages over the steps run.
func (t *CachedBiTask) Truncation() (int, []tokenize.TruncPart) {
	return t.Len.Query, []tokenize.TruncPart{
		{Name: "queries", Count: &t.qCut, L: t.Len.Query},
		{Name: "passages", Count: &t.pCut, L: t.Len.Passage},
	}
}

// copyRows copies src [M,H] into rows [at, at+M) of dst.
func copyRows(dst, src *tensor.Dense, at int) {
	h := src.Shape()[1]
	switch d := dst.Data().(type) {
	case []float32:
		copy(d[at*h:], src.Data().([]float32))
	case []float64:
		copy(d[at*h:], src.Data().([]float64))
	}
}

// sliceRows copies rows [at, at+M) of src into dst [M,H].
func sliceRows(dst, src *tensor.Dense, at int) {
	h, n := dst.Shape()[1], dst.Len()
	switch d := dst.Data().(type) {
	case []float32:
		copy(d, src.Data().([]float32)[at*h:at*h+n])
	case []float64:
		copy(d, src.Data().([]float64)[at*h:at*h+n])
	}
}

// firstDiffRow returns the first row r of a [M,H] that differs from row at+r of b, or -1.
func firstDiffRow(a, b *tensor.Dense, at int) int {
	h := a.Shape()[1]
	x, y := model.Float64s(a), model.Float64s(b)
	for i, v := range x {
		if v != y[at*h+i] {
			return i / h
		}
	}
	return -1
}

func addDense(dst, src *tensor.Dense) {
	switch d := dst.Data().(type) {
	case []float32:
		for i, v := range src.Data().([]float32) {
			d[i] += v
		}
	case []float64:
		for i, v := range src.Data().([]float64) {
			d[i] += v
		}
	}
}

func clearDense(t *tensor.Dense) {
	switch d := t.Data().(type) {
	case []float32:
		clear(d)
	case []float64:
		clear(d)
	}
}
