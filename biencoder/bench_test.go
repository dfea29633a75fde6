package biencoder

import (
	"context"
	"io"
	"testing"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// TestBiStepMatchesTrainer checks that the bench's step is the retriever's: three BiSteps on
// pre-tokenized batches leave exactly (bit for bit) the parameters that trainer.Run leaves after
// three steps of the retriever's task on the same texts, model seed, dropout seed and schedule.
func TestBiStepMatchesTrainer(t *testing.T) {
	tok, err := tokenize.Train([]string{"wing flutter at high speed", "heat transfer in a boundary layer", "shock waves on a cone"},
		tokenize.TrainOptions{VocabSize: 200, Lowercase: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: tok.VocabSize(), Hidden: 8, Layers: 1, Heads: 2, FFN: 16, MaxPosition: 8, Dropout: 0.1}
	pb := PairBatch{
		Queries:  []string{"wing flutter", "heat transfer"},
		Passages: []string{"wing flutter at high speed", "heat transfer in a boundary layer", "shock waves on a cone"},
		Mask:     []float32{1, 1, 0, 1, 1, 1},
	}
	const B, N, L, steps, seed = 2, 3, 8, 3, 5
	sched := trainer.Schedule{Peak: 1e-2, Warmup: 1, Total: steps, Kind: "linear"}

	ref, err := model.NewBiEncoder(cfg, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := infoNCE(0.05, losses.Cosine)
	if err != nil {
		t.Fatal(err)
	}
	task, err := NewBiTask(ref, tok, TaskOptions{B: B, N: N, Lengths: Lengths{Query: L, Passage: L}, Loss: loss, Masked: true, Seed: seed, Stream: StreamTrain, Next: func(int) (PairBatch, error) { return pb, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Close()
	if _, err := trainer.Run(context.Background(), task, trainer.NewAdamW(0.01),
		trainer.Options{Phase: "train", Steps: steps, Schedule: sched, GradClip: 1, Progress: io.Discard}); err != nil {
		t.Fatal(err)
	}

	m, err := model.NewBiEncoder(cfg, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewBiStep(m, BiStepOptions{B: B, N: N, Lengths: Lengths{Query: L, Passage: L}, Temperature: 0.05, Similarity: losses.Cosine, Masked: true, WeightDecay: 0.01, GradClip: 1, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, p := tok.EncodeBatch(pb.Queries, L), tok.EncodeBatch(pb.Passages, L)
	for step := range steps {
		if _, err := s.Step(step, q, p, pb.Mask, sched.LR(step)); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range ref.Params() {
		got := m.Params()[i]
		w, g := want.Value.Data().([]float32), got.Value.Data().([]float32)
		for j := range w {
			if g[j] != w[j] {
				t.Fatalf("%s[%d] = %v after BiStep, %v after trainer.Run", got.Name, j, g[j], w[j])
			}
		}
	}
	if _, err := s.Step(0, q, p, []float32{1}, 1e-3); err == nil {
		t.Error("a mask of 1 value for 2 x 3 candidates was accepted")
	}
}
