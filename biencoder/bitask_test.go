package biencoder

import (
	"math"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// TestBiTaskGradients checks the wiring of model, loss and machine: the gradients a step
// leaves are those of its loss (central finite differences in float32), and they do not
// accumulate from one step to the next (a TapeMachine adds into bound gradients).
func TestBiTaskGradients(t *testing.T) {
	tok, err := tokenize.Train([]string{"wing flutter at high speed", "heat transfer in a boundary layer", "something else"},
		tokenize.TrainOptions{VocabSize: 200, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.NewBiEncoder(model.EncoderConfig{Encoder: "bow", Vocab: tok.VocabSize(), Hidden: 8}, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	pb := PairBatch{Queries: []string{"wing", "heat"}, Passages: []string{"wing flutter", "heat transfer", "boundary layer"}}
	infonce, err := infoNCE(0.05, losses.Dot)
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewBiTask(m, tok, TaskOptions{B: 2, N: 3, Lengths: Lengths{Query: 8, Passage: 8}, Loss: infonce, Seed: 1, Stream: 1, Next: func(int) (PairBatch, error) { return pb, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	loss := func() float64 {
		l, _, err := task.Step(0)
		if err != nil {
			t.Fatal(err)
		}
		task.AfterUpdate()
		return l
	}
	if _, _, err := task.Step(0); err != nil {
		t.Fatal(err)
	}
	first := make([][]float32, len(task.Params()))
	for i, p := range task.Params() {
		first[i] = append([]float32(nil), p.Grad...)
	}
	task.AfterUpdate()
	if _, _, err := task.Step(0); err != nil {
		t.Fatal(err)
	}
	for i, p := range task.Params() {
		for j := range p.Grad {
			if p.Grad[j] != first[i][j] {
				t.Fatalf("%s[%d]: gradient %v on the second identical step, %v on the first", p.Name, j, p.Grad[j], first[i][j])
			}
		}
	}
	task.AfterUpdate()
	checked := 0
	for i, p := range task.Params() {
		// The element with the largest gradient of each parameter.
		best := 0
		for j, g := range first[i] {
			if math.Abs(float64(g)) > math.Abs(float64(first[i][best])) {
				best = j
			}
		}
		g := float64(first[i][best])
		if math.Abs(g) < 1e-3 {
			continue
		}
		const h = 1e-2
		orig := p.Value[best]
		p.Value[best] = orig + h
		lp := loss()
		p.Value[best] = orig - h
		lm := loss()
		p.Value[best] = orig
		fd := (lp - lm) / (2 * h)
		if math.Abs(fd-g) > 0.02*math.Abs(g)+1e-4 {
			t.Errorf("%s[%d]: gradient %.6g, finite difference %.6g", p.Name, best, g, fd)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no parameter had a gradient large enough to check")
	}
}

// TestBiTaskQueryAndPassageLengths builds the training graph with queries of 6 tokens and
// passages of 12: on queries that fit in 6 tokens its loss and gradients are those of the graph
// padding both sides to 12 (padding is masked; no dropout), and Truncation reports each side at
// its own length.
func TestBiTaskQueryAndPassageLengths(t *testing.T) {
	tok := bertTokenizer(t)
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 16, Layers: 1, Heads: 2, FFN: 32, MaxPosition: 16}
	// Queries of 2 tokens each (4 of 6 with [CLS] and [SEP]); passages of 8, 6 and 11 tokens,
	// the last cut by 1 to fit 12.
	pb := PairBatch{
		Queries: []string{"wing flutter", "heat transfer"},
		Passages: []string{"the wing of an aircraft at high speed", "heat transfer in a boundary layer",
			"shock waves on a cone at high speed and low pressure"},
	}
	infonce, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	step := func(lens Lengths) (*BiTask, float64, [][]float32) {
		m, err := model.NewBiEncoder(cfg, false, 2)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m, 0.3, 2)
		task, err := NewBiTask(m, tok, TaskOptions{B: 2, N: 3, Lengths: lens, Loss: infonce, Seed: 1, Stream: StreamTrain, Next: func(int) (PairBatch, error) { return pb, nil }})
		if err != nil {
			t.Fatal(err)
		}
		loss, _, err := task.Step(0)
		if err != nil {
			t.Fatal(err)
		}
		var grads [][]float32
		for _, p := range task.Params() {
			grads = append(grads, append([]float32(nil), p.Grad...))
		}
		return task, loss, grads
	}
	split, loss, grads := step(Lengths{Query: 6, Passage: 12})
	defer split.Close()
	same, wantLoss, wantGrads := step(Lengths{Query: 12, Passage: 12})
	defer same.Close()
	if math.Abs(loss-wantLoss) > 1e-6 || loss == 0 {
		t.Errorf("loss %.9g with queries of 6 tokens, %.9g with 12", loss, wantLoss)
	}
	d := 0.0
	for i := range grads {
		d = max(d, maxAbsDiff(grads[i], wantGrads[i]))
	}
	if d > 1e-5 {
		t.Errorf("gradients differ by %.3g between queries of 6 and of 12 tokens", d)
	}
	t.Logf("loss %.6f; |loss difference| %.3g, max |gradient difference| %.3g", loss, math.Abs(loss-wantLoss), d)

	pb.Queries[1] = "heat transfer in a boundary layer" // 6 tokens: 2 cut to fit 6 with [CLS] and [SEP]
	if _, _, err := split.Step(1); err != nil {
		t.Fatal(err)
	}
	L, parts := split.Truncation()
	var out strings.Builder
	tokenize.ReportTruncation(&out, "train", L, parts...)
	want := "train: truncation: queries to 6 tokens 1 of 4 cut (16.7% of their tokens dropped); passages to 12 tokens 2 of 6 cut (4.0% of their tokens dropped)\n"
	if out.String() != want {
		t.Errorf("report %q, want %q", out.String(), want)
	}
}
