package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func bowConfig(v, h int) EncoderConfig {
	return EncoderConfig{Encoder: EncoderBow, Vocab: v, Hidden: h}
}

// toyBatch returns B queries and B passages of length L over 3*B+2 token
// ids: pair i shares the topic tokens 2+3i..4+3i (query: 2 of them,
// passage: all 3, shuffled), ids 0 and 1 are [PAD] and [CLS]-like noise.
func toyBatch(r *rand.Rand, B, L int) (qIDs []int, qMask []float32, pIDs []int, pMask []float32) {
	qIDs, pIDs = make([]int, B*L), make([]int, B*L)
	qMask, pMask = make([]float32, B*L), make([]float32, B*L)
	for i := 0; i < B; i++ {
		topic := []int{2 + 3*i, 3 + 3*i, 4 + 3*i}
		r.Shuffle(3, func(a, b int) { topic[a], topic[b] = topic[b], topic[a] })
		qIDs[i*L], qMask[i*L] = 1, 1
		pIDs[i*L], pMask[i*L] = 1, 1
		for j := 0; j < 2; j++ {
			qIDs[i*L+1+j], qMask[i*L+1+j] = topic[j], 1
		}
		for j := 0; j < 3; j++ {
			pIDs[i*L+1+j], pMask[i*L+1+j] = topic[j], 1
		}
	}
	return
}

// inBatchNLL is the in-batch softmax cross-entropy of q [B,H] against p
// [B,H] with positives on the diagonal (InfoNCE with tau = 1), averaged.
func inBatchNLL(q, p *gorgonia.Node) (*gorgonia.Node, error) {
	b := q.Shape()[0]
	s, err := MatMul(q, p, false, true)
	if err != nil {
		return nil, err
	}
	sm, err := gorgonia.SoftMax(s)
	if err != nil {
		return nil, err
	}
	lg, err := gorgonia.Log(sm)
	if err != nil {
		return nil, err
	}
	eye := tensor.New(tensor.WithShape(b, b), tensor.Of(q.Dtype()))
	for i := 0; i < b; i++ {
		if q.Dtype() == tensor.Float32 {
			eye.Data().([]float32)[i*b+i] = -1 / float32(b)
		} else {
			eye.Data().([]float64)[i*b+i] = -1 / float64(b)
		}
	}
	e := leafIn(q.Graph(), "eye", eye)
	prod, err := gorgonia.HadamardProd(lg, e)
	if err != nil {
		return nil, err
	}
	return gorgonia.Sum(prod)
}

// pairGraph builds q and p towers of m on a B x L batch and a loss.
type pairGraph struct {
	g      *gorgonia.ExprGraph
	binder *Binder
	qIn    *Inputs
	pIn    *Inputs
	q, p   *gorgonia.Node
	loss   *gorgonia.Node
}

func newPairGraph(t testing.TB, m *BiEncoder, B, L int, train bool, loss func(q, p *gorgonia.Node) (*gorgonia.Node, error)) *pairGraph {
	t.Helper()
	pg := &pairGraph{g: gorgonia.NewGraph()}
	pg.binder = NewBinder(pg.g)
	dt := m.Query.dt
	pg.qIn = newInputs(pg.g, B, L, "q", dt)
	pg.pIn = newInputs(pg.g, B, L, "p", dt)
	var err error
	if pg.q, err = m.Query.Build(pg.binder, pg.qIn, train); err != nil {
		t.Fatal(err)
	}
	if pg.p, err = m.Passage.Build(pg.binder, pg.pIn, train); err != nil {
		t.Fatal(err)
	}
	if pg.loss, err = loss(pg.q, pg.p); err != nil {
		t.Fatal(err)
	}
	return pg
}

func sumLoss(q, p *gorgonia.Node) (*gorgonia.Node, error) {
	a, err := weightedSum(q, 1)
	if err != nil {
		return nil, err
	}
	b, err := weightedSum(p, 2)
	if err != nil {
		return nil, err
	}
	return gorgonia.Add(a, b)
}

// paramCheck runs fdCheck on every parameter bound in pg.
func paramCheck(t *testing.T, name string, pg *pairGraph, before func(), maxElems int, tol float64) {
	t.Helper()
	bound := pg.binder.Bound()
	vals := make([]*tensor.Dense, len(bound))
	names := make([]string, len(bound))
	for i, b := range bound {
		vals[i], names[i] = b.Param.Value, b.Param.Name
	}
	fdCheck(t, name, pg.loss, pg.binder.Nodes(), vals, names, before, maxElems, tol)
}

func TestBowGradients(t *testing.T) {
	for _, shared := range []bool{true, false} {
		m, err := newBiEncoder(bowConfig(20, 6), shared, 1, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		pg := newPairGraph(t, m, 4, 5, false, sumLoss)
		qi, qm, pi, pm := toyBatch(rand.New(rand.NewPCG(1, 1)), 4, 5)
		if err := pg.qIn.Let(qi, qm, nil); err != nil {
			t.Fatal(err)
		}
		if err := pg.pIn.Let(pi, pm, nil); err != nil {
			t.Fatal(err)
		}
		want := 3
		if !shared {
			want = 6
		}
		if n := len(pg.binder.Bound()); n != want {
			t.Errorf("shared=%t: %d bound parameters, want %d", shared, n, want)
		}
		// every element of the embedding matrix: used rows and unused ones (zero gradient).
		paramCheck(t, "bow", pg, nil, 1000, 1e-6)
	}
}

func TestBowParams(t *testing.T) {
	m, err := NewBiEncoder(bowConfig(30, 4), false, 7)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range m.Params() {
		got = append(got, p.Name+tensorShape(p))
	}
	want := "query.embeddings.word[30 4] query.proj.weight[4 4] query.proj.bias[4] passage.embeddings.word[30 4] passage.proj.weight[4 4] passage.proj.bias[4]"
	if strings.Join(got, " ") != want {
		t.Errorf("params %s, want %s", strings.Join(got, " "), want)
	}
	// N(0, 0.02²) embeddings, Xavier U(-sqrt(6/8), sqrt(6/8)) projection, zero bias.
	emb := values(m.Param("query.embeddings.word").Value)
	var ss float64
	for _, v := range emb {
		ss += v * v
	}
	if sd := math.Sqrt(ss / float64(len(emb))); sd < 0.015 || sd > 0.025 {
		t.Errorf("embedding sd %.4f, want about 0.02", sd)
	}
	for _, v := range values(m.Param("query.proj.weight").Value) {
		if math.Abs(v) > math.Sqrt(6.0/8) {
			t.Errorf("xavier weight %v outside ±%v", v, math.Sqrt(6.0/8))
		}
	}
	for _, v := range values(m.Param("query.proj.bias").Value) {
		if v != 0 {
			t.Errorf("bias %v, want 0", v)
		}
	}
	m2, _ := NewBiEncoder(bowConfig(30, 4), false, 7)
	assertClose(t, "same seed", values(m2.Params()[3].Value), values(m.Params()[3].Value), 0)
	if a, b := values(m.Params()[0].Value), values(m.Params()[3].Value); a[0] == b[0] {
		t.Errorf("query and passage towers start equal; want independent draws")
	}
	s, _ := NewBiEncoder(bowConfig(30, 4), true, 7)
	if s.Query != s.Passage || len(s.Params()) != 3 || s.Params()[0].Name != "encoder.embeddings.word" {
		t.Errorf("shared bi-encoder: towers %p %p, %d params", s.Query, s.Passage, len(s.Params()))
	}
}

func tensorShape(p *Param) string {
	return fmt.Sprint([]int(p.Value.Shape()))
}

// sgd takes one plain gradient step on every bound parameter.
func sgd(t testing.TB, bound []Bound, grads gorgonia.Nodes, lr float32) {
	for i, b := range bound {
		w := b.Param.Value.Data().([]float32)
		g := grads[i].Value().Data().([]float32)
		for j := range w {
			w[j] -= lr * g[j]
		}
	}
}

func TestBowTrainingLoop(t *testing.T) {
	const B, L = 8, 6
	m, err := NewBiEncoder(bowConfig(3*B+2, 16), true, 3)
	if err != nil {
		t.Fatal(err)
	}
	pg := newPairGraph(t, m, B, L, true, inBatchNLL)
	grads, err := gorgonia.Grad(pg.loss, pg.binder.Nodes()...)
	if err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(pg.g)
	defer vm.Close()
	r := rand.New(rand.NewPCG(4, 4))
	var first, last float64
	for step := 0; step < 300; step++ {
		qi, qm, pi, pm := toyBatch(r, B, L)
		if err := pg.qIn.Let(qi, qm, nil); err != nil {
			t.Fatal(err)
		}
		if err := pg.pIn.Let(pi, pm, nil); err != nil {
			t.Fatal(err)
		}
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		l := scalar(t, pg.loss)
		if step == 0 {
			first = l
		}
		last = l
		sgd(t, pg.binder.Bound(), grads, 20)
	}
	// At initialisation the embeddings are tiny: loss ≈ ln 8 = 2.079.
	if math.Abs(first-math.Log(B)) > 0.01 {
		t.Errorf("initial loss %.4f, want ln %d = %.4f", first, B, math.Log(B))
	}
	if last > 0.1*first {
		t.Errorf("loss went from %.4f to %.4f in 300 SGD steps, want below %.4f", first, last, 0.1*first)
	}
}

// TestRunnerMatchesTrainingGraph encodes the same sequences with the
// training graph (dropout 0) and with an EncoderRunner whose batch size
// leaves a partial last batch.
func TestRunnerMatchesTrainingGraph(t *testing.T) {
	cfgs := []EncoderConfig{
		bowConfig(26, 8),
		{Encoder: EncoderTransformer, Vocab: 26, Hidden: 8, Layers: 1, Heads: 2, FFN: 16, MaxPosition: 6},
	}
	for _, cfg := range cfgs {
		m, err := NewBiEncoder(cfg, false, 5)
		if err != nil {
			t.Fatal(err)
		}
		const B, L = 8, 6
		pg := newPairGraph(t, m, B, L, true, sumLoss)
		// The loss ops may overwrite p's value in place (Gorgonia reuses
		// dead registers), so read a copy.
		var pv gorgonia.Value
		gorgonia.Read(pg.p, &pv)
		qi, qm, pi, pm := toyBatch(rand.New(rand.NewPCG(2, 2)), B, L)
		pg.qIn.Let(qi, qm, nil)
		pg.pIn.Let(pi, pm, nil)
		runGraph(t, pg.g)
		r, err := NewEncoderRunner(m.Passage, 3, L)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Encode(pi, pm, nil, B)
		if err != nil {
			t.Fatal(err)
		}
		assertClose(t, cfg.Encoder+" runner vs training graph", f32s(got), values(pv), 1e-6)
		r.Close()
	}
}

func f32s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestRepeatedRuns runs one training graph 200 times: results must not
// change and the heap must not grow.
func TestRepeatedRuns(t *testing.T) {
	const B, L = 8, 6
	m, err := NewBiEncoder(bowConfig(3*B+2, 16), true, 3)
	if err != nil {
		t.Fatal(err)
	}
	pg := newPairGraph(t, m, B, L, true, inBatchNLL)
	grads, err := gorgonia.Grad(pg.loss, pg.binder.Nodes()...)
	if err != nil {
		t.Fatal(err)
	}
	qi, qm, pi, pm := toyBatch(rand.New(rand.NewPCG(1, 2)), B, L)
	pg.qIn.Let(qi, qm, nil)
	pg.pIn.Let(pi, pm, nil)
	vm := gorgonia.NewTapeMachine(pg.g)
	defer vm.Close()
	var loss0 float64
	var grad0 []float64
	var heap20 uint64
	for i := 0; i < 200; i++ {
		vm.Reset()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		l, gr := scalar(t, pg.loss), values(grads[0].Value())
		if i == 0 {
			loss0, grad0 = l, gr
		} else if l != loss0 {
			t.Fatalf("run %d: loss %v, first run %v", i, l, loss0)
		} else {
			assertClose(t, "embedding gradient", gr, grad0, 0)
		}
		if i == 20 {
			heap20 = heapInUse()
		}
	}
	if grow := int64(heapInUse()) - int64(heap20); grow > 1<<20 {
		t.Errorf("heap grew by %d bytes over 180 runs", grow)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestInputsLet(t *testing.T) {
	g := gorgonia.NewGraph()
	in := NewInputs(g, 2, 3, "q")
	cases := []struct {
		ids   []int
		mask  []float32
		types []int
		want  string
	}{
		{[]int{1, 2, 3, 4, 5}, make([]float32, 6), nil, "5 ids, want B*L = 2*3 = 6"},
		{make([]int, 6), make([]float32, 7), nil, "7 mask values"},
		{make([]int, 6), make([]float32, 6), []int{0}, "1 types"},
		{make([]int, 6), []float32{1, 1, 0.5, 0, 0, 0}, nil, "mask[2] = 0.5, want 0 or 1"},
	}
	for _, c := range cases {
		err := in.Let(c.ids, c.mask, c.types)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Let: error %v, want %q", err, c.want)
		}
	}
	if err := in.Let([]int{1, 2, 3, 4, 5, 6}, []float32{1, 1, 0, 1, 0, 0}, []int{0, 1, 1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if got := in.IDs.Value().Data().([]int); got[5] != 6 {
		t.Errorf("ids %v", got)
	}
	if got := in.Mask.Value().Data().([]float32); got[3] != 1 || got[2] != 0 {
		t.Errorf("mask %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second NewInputs named q: want a panic")
		}
	}()
	NewInputs(g, 2, 3, "q")
}

func TestConfigValidate(t *testing.T) {
	ok := EncoderConfig{Encoder: EncoderTransformer, Vocab: 10, Hidden: 8, Layers: 1, Heads: 2, FFN: 16, MaxPosition: 8, Dropout: 0.1, Pooling: "cls"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		edit func(c *EncoderConfig)
		want string
	}{
		{func(c *EncoderConfig) { c.Encoder = "lstm" }, `encoder = "lstm"`},
		{func(c *EncoderConfig) { c.Vocab = 0 }, "vocab = 0"},
		{func(c *EncoderConfig) { c.Hidden = -1 }, "hidden = -1"},
		{func(c *EncoderConfig) { c.Heads = 3 }, "heads = 3, want > 0 and dividing hidden = 8"},
		{func(c *EncoderConfig) { c.Layers = 0 }, "layers = 0"},
		{func(c *EncoderConfig) { c.FFN = 0 }, "ffn = 0"},
		{func(c *EncoderConfig) { c.MaxPosition = 0 }, "max_position = 0"},
		{func(c *EncoderConfig) { c.Dropout = 1 }, "dropout = 1"},
		{func(c *EncoderConfig) { c.Pooling = "max" }, `pooling = "max"`},
		{func(c *EncoderConfig) { c.Encoder = EncoderBow }, `pooling = "cls" needs encoder = "transformer"`},
	}
	for _, c := range cases {
		cfg := ok
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate: error %v, want %q", err, c.want)
		}
		if _, err := NewBiEncoder(cfg, true, 1); err == nil {
			t.Errorf("NewBiEncoder accepted %+v", cfg)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	m, _ := NewBiEncoder(bowConfig(5, 2), true, 1)
	r, err := NewEncoderRunner(m.Query, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Encode(make([]int, 5), make([]float32, 6), nil, 2); err == nil || !strings.Contains(err.Error(), "need 6 ids") {
		t.Errorf("Encode with 5 ids: %v", err)
	}
	_, err = r.Encode([]int{0, 1, 9}, []float32{1, 1, 1}, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "id 9 at position 2 is out of range [0,5)") {
		t.Errorf("Encode with id 9: %v", err)
	}
	// Sequences with no real token encode to the projection bias (0).
	v, err := r.Encode(make([]int, 3), make([]float32, 3), nil, 1)
	if err != nil || len(v) != 2 || v[0] != 0 || v[1] != 0 {
		t.Errorf("empty sequence: %v, %v", v, err)
	}
}
