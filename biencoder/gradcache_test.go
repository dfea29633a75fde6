package biencoder

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// infoNCEBatch returns InfoNCE (cosine, tau 0.05) and a random batch of B queries and N passages
// drawn from PCG(seed, seed+1).
func infoNCEBatch(t *testing.T, seed uint64, B, N int, lens Lengths, vocab int) (ContrastiveLoss, tokenize.Batch, tokenize.Batch) {
	t.Helper()
	loss, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, seed+1))
	return loss, randomBatch(r, B, lens.Query, vocab), randomBatch(r, N, lens.Passage, vocab)
}

// newCachedTask returns the cached task over chunks of M rows of a new bi-encoder of cfg (shared
// towers, initialised from seed), with loss, no candidate mask and dropout seed 1.
func newCachedTask(t *testing.T, cfg model.EncoderConfig, seed uint64, B, N, M int, lens Lengths, loss ContrastiveLoss) *CachedBiTask {
	t.Helper()
	m, err := model.NewBiEncoder(cfg, true, seed)
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewCachedBiTask(m, nil, TaskOptions{B: B, N: N, MiniBatch: M, Lengths: lens, Loss: loss, Seed: 1, Stream: StreamTrain})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// randomBatch is n sequences of L random token ids in [4, vocab), each of a random length in
// [2, L] (mask 1 on the first tokens).
func randomBatch(r *rand.Rand, n, L, vocab int) tokenize.Batch {
	b := tokenize.Batch{B: n, L: L, IDs: make([]int, n*L), Mask: make([]float32, n*L)}
	for i := range n {
		k := 2 + r.IntN(L-1)
		for j := range k {
			b.IDs[i*L+j] = 4 + r.IntN(vocab-4)
			b.Mask[i*L+j] = 1
		}
	}
	return b
}

// fullBatchGradients runs the uncached computation of BiTask (one graph over all B queries and
// N passages, the same loss head) and returns the loss and every parameter's gradient by name.
func fullBatchGradients(t *testing.T, m *model.BiEncoder, lens Lengths, loss ContrastiveLoss, masked bool, pb PairBatch, q, p tokenize.Batch) (float64, map[string][]float64) {
	t.Helper()
	g := gorgonia.NewGraph()
	b := model.NewBinder(g)
	dt := m.Query.Dtype()
	qIn := model.NewInputsOf(g, q.B, lens.Query, "query", dt)
	pIn := model.NewInputsOf(g, p.B, lens.Passage, "passage", dt)
	qn, err := m.Query.Build(b, qIn, true)
	if err != nil {
		t.Fatal(err)
	}
	pn, err := m.Passage.Build(b, pIn, true)
	if err != nil {
		t.Fatal(err)
	}
	head, err := newContrastiveHead(g, qn, pn, q.B, p.B, loss, masked)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gorgonia.Grad(head.loss, b.Nodes()...); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(b.Nodes()...))
	defer vm.Close()
	if err := head.fill(pb); err != nil {
		t.Fatal(err)
	}
	if err := qIn.Let(q.IDs, q.Mask, nil); err != nil {
		t.Fatal(err)
	}
	if err := pIn.Let(p.IDs, p.Mask, nil); err != nil {
		t.Fatal(err)
	}
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	grads := map[string][]float64{}
	for _, bd := range b.Bound() {
		gv, err := bd.Node.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads[bd.Param.Name] = append([]float64(nil), model.Float64s(gv.(*tensor.Dense))...)
	}
	return scalar64(head.loss), grads
}

func scalar64(n *gorgonia.Node) float64 {
	switch v := n.Value().Data().(type) {
	case float64:
		return v
	case float32:
		return float64(v)
	}
	panic("not a scalar")
}

// TestCachedBiTaskMatchesFullBatch: in float64 the cached step's loss and the gradient of every
// parameter of a two-layer Transformer equal those of one graph over the whole batch to 1e-6
// (shared and separate towers, InfoNCE with and without a candidate mask, chunks of 2 and 4 rows
// of a batch of 8 queries and 16 passages).
func TestCachedBiTaskMatchesFullBatch(t *testing.T) {
	const B, N, vocab = 8, 16, 40
	lens := Lengths{Query: 6, Passage: 10}
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: vocab, Hidden: 16, Layers: 2, Heads: 2, FFN: 32, MaxPosition: 16}
	worst := 0.0
	for _, shared := range []bool{true, false} {
		for _, masked := range []bool{false, true} {
			for _, M := range []int{2, 4} {
				m, err := model.NewBiEncoderOf(cfg, shared, 7, tensor.Float64)
				if err != nil {
					t.Fatal(err)
				}
				loss, err := infoNCE(0.05, losses.Cosine)
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(3, uint64(M)))
				q, p := randomBatch(r, B, lens.Query, vocab), randomBatch(r, N, lens.Passage, vocab)
				pb := PairBatch{}
				if masked {
					pb.Mask = make([]float32, B*N)
					for i := range pb.Mask {
						pb.Mask[i] = 1
					}
					pb.Mask[0*N+3], pb.Mask[5*N+12] = 0, 0 // two false negatives
				}
				wantLoss, want := fullBatchGradients(t, m, lens, loss, masked, pb, q, p)
				task, err := NewCachedBiTask(m, nil, TaskOptions{B: B, N: N, MiniBatch: M, Lengths: lens, Loss: loss, Masked: masked, Seed: 1, Stream: StreamTrain})
				if err != nil {
					t.Fatal(err)
				}
				for run := range 2 { // the second run checks that nothing carries over between steps
					got, n, err := task.StepTokens(run, pb, q, p)
					if err != nil {
						t.Fatal(err)
					}
					if n != B || math.Abs(got-wantLoss) > 1e-9*math.Max(1, math.Abs(wantLoss)) {
						t.Fatalf("shared=%v masked=%v M=%d: loss %v (%d examples), full batch %v", shared, masked, M, got, n, wantLoss)
					}
					if len(want) != len(m.Params()) {
						t.Fatalf("full batch bound %d parameters, the model has %d", len(want), len(m.Params()))
					}
					for name, w := range want {
						g := task.gradient(name)
						if len(g) != len(w) {
							t.Fatalf("%s: %d gradient values, want %d", name, len(g), len(w))
						}
						for i := range w {
							d := math.Abs(g[i] - w[i])
							worst = math.Max(worst, d)
							if d > 1e-6 {
								t.Fatalf("shared=%v masked=%v M=%d: %s[%d]: cached gradient %v, full batch %v", shared, masked, M, name, i, g[i], w[i])
							}
						}
					}
					task.AfterUpdate()
				}
				task.Close()
			}
		}
	}
	t.Logf("largest |cached - full batch| over every parameter gradient: %.3g", worst)
}

// TestCachedBiTaskGolden runs the 16-query InfoNCE golden case of losses/testdata (cosine, tau
// 0.05, one hard negative per query) through the cached path with chunks of 4: a bow model whose
// projection is the identity maps each one-token text to its word embedding, so the loss is the
// golden loss and the word embeddings' gradient rows are the golden grad_q, grad_d_pos and
// grad_d_neg (1e-6 relative, float64).
func TestCachedBiTaskGolden(t *testing.T) {
	raw, err := os.ReadFile("../losses/testdata/losses.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []map[string]any `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	for _, x := range file.Cases {
		if x["kind"] == "infonce" && len(x["q"].([]any)) == 16 {
			c = x
		}
	}
	if c == nil {
		t.Fatal("no 16-query infonce case in losses.json")
	}
	var flat func(v any) [][]float64 // [B,H] as rows, [B,M,H] as its B*M rows
	flat = func(v any) [][]float64 {
		var rows [][]float64
		for _, r := range v.([]any) {
			rr := r.([]any)
			if _, ok := rr[0].([]any); ok {
				rows = append(rows, flat(rr)...)
				continue
			}
			row := make([]float64, len(rr))
			for i, e := range rr {
				row[i] = e.(float64)
			}
			rows = append(rows, row)
		}
		return rows
	}
	qs, pos, neg := flat(c["q"]), flat(c["d_pos"]), flat(c["d_neg"])
	gq, gpos, gneg := flat(c["grad_q"]), flat(c["grad_d_pos"]), flat(c["grad_d_neg"])
	B, H := len(qs), len(qs[0])
	ps := append(append([][]float64(nil), pos...), neg...)
	gp := append(append([][]float64(nil), gpos...), gneg...)
	N := len(ps)
	const first = 4 // ids below are special tokens, unused
	m, err := model.NewBiEncoderOf(model.EncoderConfig{Encoder: "bow", Vocab: first + B + N, Hidden: H}, true, 1, tensor.Float64)
	if err != nil {
		t.Fatal(err)
	}
	word := m.Param("encoder.embeddings.word").Value.Data().([]float64)
	for i, row := range append(append([][]float64(nil), qs...), ps...) {
		copy(word[(first+i)*H:], row)
	}
	w := m.Param("encoder.proj.weight").Value.Data().([]float64)
	clear(w)
	for i := range H {
		w[i*H+i] = 1
	}
	clear(m.Param("encoder.proj.bias").Value.Data().([]float64))
	oneToken := func(n, from int) tokenize.Batch {
		b := tokenize.Batch{B: n, L: 2, IDs: make([]int, 2*n), Mask: make([]float32, 2*n)}
		for i := range n {
			b.IDs[2*i], b.Mask[2*i] = from+i, 1
		}
		return b
	}
	loss, err := infoNCE(c["temperature"].(float64), losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewCachedBiTask(m, nil, TaskOptions{B: B, N: N, MiniBatch: 4, Lengths: Lengths{Query: 2, Passage: 2}, Loss: loss, Seed: 1, Stream: StreamTrain})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	got, _, err := task.StepTokens(0, PairBatch{}, oneToken(B, first), oneToken(N, first+B))
	if err != nil {
		t.Fatal(err)
	}
	close := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("%s: cached %v, golden %v", what, got, want)
		}
	}
	close("loss", got, c["loss"].(float64))
	g := task.gradient("encoder.embeddings.word")
	for i, row := range append(append([][]float64(nil), gq...), gp...) {
		for j, want := range row {
			close(fmt.Sprintf("gradient of embedding row %d [%d]", i, j), g[(first+i)*H+j], want)
		}
	}
}

// TestCachedBiTaskDropout: with dropout the re-forward of every chunk reproduces its cached
// embeddings bit for bit (Step fails otherwise), a step is a function of its number, and in
// float32 without dropout the trainer's parameters and gradients are those of BiTask.
func TestCachedBiTaskDropout(t *testing.T) {
	const B, N, vocab = 8, 16, 40
	lens := Lengths{Query: 8, Passage: 8}
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: vocab, Hidden: 16, Layers: 1, Heads: 2, FFN: 32, MaxPosition: 16, Dropout: 0.2}
	loss, q, p := infoNCEBatch(t, 5, B, N, lens, vocab)
	task := newCachedTask(t, cfg, 3, B, N, 4, lens, loss)
	defer task.Close()
	run := func(step int) []float32 {
		if _, _, err := task.StepTokens(step, PairBatch{}, q, p); err != nil {
			t.Fatal(err)
		}
		var out []float32
		for _, pr := range task.Params() {
			out = append(out, pr.Grad...)
		}
		task.AfterUpdate()
		return out
	}
	a, b, c := run(3), run(3), run(4)
	same := func(x, y []float32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("two runs of step 3 left different gradients")
	}
	if same(a, c) {
		t.Fatal("steps 3 and 4 drew the same dropout masks")
	}

	// float32, no dropout: the trainer sees BiTask's parameters and (to rounding) gradients.
	cfg.Dropout = 0
	m, err := model.NewBiEncoder(cfg, true, 3)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := NewCachedBiTask(m, nil, TaskOptions{B: B, N: N, MiniBatch: 2, Lengths: lens, Loss: loss, Seed: 1, Stream: StreamTrain})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Close()
	bt, err := NewBiTask(m, nil, TaskOptions{B: B, N: N, Lengths: lens, Loss: loss, Seed: 1, Stream: StreamTrain})
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	if err := bt.qIn.Let(q.IDs, q.Mask, nil); err != nil {
		t.Fatal(err)
	}
	if err := bt.pIn.Let(p.IDs, p.Mask, nil); err != nil {
		t.Fatal(err)
	}
	if err := bt.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ct.StepTokens(0, PairBatch{}, q, p); err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{}
	for _, pr := range bt.Params() {
		want[pr.Name] = pr.Grad
	}
	if len(ct.Params()) != len(want) {
		t.Fatalf("cached task has %d parameters, BiTask %d", len(ct.Params()), len(want))
	}
	for _, pr := range ct.Params() {
		w := want[pr.Name]
		for i := range w {
			if d := math.Abs(float64(pr.Grad[i] - w[i])); d > 1e-4*math.Max(1, math.Abs(float64(w[i]))) {
				t.Fatalf("%s[%d]: cached %v, BiTask %v", pr.Name, i, pr.Grad[i], w[i])
			}
		}
	}
}

// TestCachedBiTaskSharedBuffersSameBits: the chunk graphs with shared buffers
// (model.ShareBuffers, which keeps a few activations at a time) give the same loss and the same
// gradients, bit for bit, as without, over two steps with dropout and dynamic padding (chunk
// graphs of several lengths), so that sharing changes memory and nothing else.
func TestCachedBiTaskSharedBuffersSameBits(t *testing.T) {
	const B, N, vocab = 8, 16, 40
	lens := Lengths{Query: 8, Passage: 96}
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: vocab, Hidden: 16, Layers: 2, Heads: 2, FFN: 32, MaxPosition: 96, Dropout: 0.1}
	loss, q, p := infoNCEBatch(t, 8, B, N, lens, vocab)
	for i := range N { // passage i cut to at most 3 + 6i tokens: chunks of 4 padded to lengths of 32 to 96 (Dynamic)
		for j := 3 + 6*i; j < lens.Passage; j++ {
			p.IDs[i*lens.Passage+j], p.Mask[i*lens.Passage+j] = 0, 0
		}
	}
	run := func(share bool) (losses []float64, grads [][]float32, built int) {
		shareCachedBuffers = share
		defer func() { shareCachedBuffers = true }()
		task := newCachedTask(t, cfg, 4, B, N, 4, lens, loss)
		defer task.Close()
		task.Dynamic = true
		for step := range 2 {
			l, _, err := task.StepTokens(step, PairBatch{}, q, p)
			if err != nil {
				t.Fatal(err)
			}
			var g []float32
			for _, pr := range task.Params() {
				g = append(g, pr.Grad...)
			}
			losses, grads = append(losses, l), append(grads, g)
			task.AfterUpdate()
		}
		return losses, grads, task.Built()
	}
	wantLoss, want, _ := run(false)
	gotLoss, got, built := run(true)
	if built < 2 {
		t.Fatalf("dynamic padding built %d extra chunk graphs, want several lengths", built)
	}
	for s := range want {
		if gotLoss[s] != wantLoss[s] {
			t.Fatalf("step %d: loss %v with shared buffers, %v without", s, gotLoss[s], wantLoss[s])
		}
		if len(got[s]) != len(want[s]) || len(want[s]) == 0 {
			t.Fatalf("step %d: %d gradient values, want %d", s, len(got[s]), len(want[s]))
		}
		for i := range want[s] {
			if got[s][i] != want[s][i] {
				t.Fatalf("step %d: gradient value %d: %v with shared buffers, %v without", s, i, got[s][i], want[s][i])
			}
		}
	}
}
