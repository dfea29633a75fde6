package dense

import (
	"math"
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
	task, err := NewBiTask(m, tok, 2, 3, 8, infonce, false, 1, 1, func(int) (PairBatch, error) { return pb, nil })
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
