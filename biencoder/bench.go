package biencoder

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/trainer"
)

// BiStep is the retriever recipe's training step on batches already tokenized, for the speed
// benchmark (package bench): the graph of the retriever's training phase (NewBiTask: both towers,
// InfoNCE), then what trainer.Run does after each step (global-norm clipping, AdamW, zeroing the
// gradients). Tokenizing is left out, so the step can be timed against another toolkit fed the
// same token ids.
type BiStep struct {
	t    *BiTask
	opt  *trainer.AdamW
	clip float64
}

// BiStepOptions are the settings of a timed bi-encoder step (NewBiStep).
type BiStepOptions struct {
	B, N        int     // queries and passages (passage i < B the positive of query i)
	Lengths     Lengths // each side's L
	Temperature float64 // InfoNCE's temperature
	Similarity  losses.Similarity
	Masked      bool    // a B x N candidate mask, as false_negatives = "mask"
	WeightDecay float64 // AdamW's
	GradClip    float64 // the largest global gradient norm; <= 0 disables clipping
	Seed        uint64  // seeds the dropout masks of each step
}

// NewBiStep builds the training graph of m for o.B queries of o.Lengths.Query tokens and o.N
// passages of o.Lengths.Passage tokens, InfoNCE at o.Temperature and o.Similarity, and AdamW.
func NewBiStep(m *model.BiEncoder, o BiStepOptions) (*BiStep, error) {
	loss, err := infoNCE(o.Temperature, o.Similarity)
	if err != nil {
		return nil, err
	}
	t, err := NewBiTask(m, nil, TaskOptions{B: o.B, N: o.N, Lengths: o.Lengths, Loss: loss, Masked: o.Masked, Seed: o.Seed, Stream: StreamTrain})
	if err != nil {
		return nil, err
	}
	return &BiStep{t: t, opt: trainer.NewAdamW(o.WeightDecay), clip: o.GradClip}, nil
}

// Step runs step number step with learning rate lr on q (B sequences) and p (N sequences) and
// returns the loss. keep is the B x N candidate mask of a masked step (0 drops passage j from
// query i's softmax; nil keeps every one) and must be nil otherwise.
func (s *BiStep) Step(step int, q, p tokenize.Batch, keep []float32, lr float64) (float64, error) {
	t := s.t
	if t.head.mask == nil && keep != nil {
		return 0, fmt.Errorf("bench step: candidate mask given to an unmasked step")
	}
	if t.head.mask != nil {
		m := t.head.mask.Data().([]float32)
		if keep != nil && len(keep) != len(m) {
			return 0, fmt.Errorf("bench step: candidate mask of %d values, want %d", len(keep), len(m))
		}
		for i := range m {
			m[i] = 0
			if keep != nil && keep[i] == 0 {
				m[i] = float32(math.Inf(-1))
			}
		}
	}
	if err := t.qIn.Let(q.IDs, q.Mask, q.Types); err != nil {
		return 0, err
	}
	if err := t.pIn.Let(p.IDs, p.Mask, p.Types); err != nil {
		return 0, err
	}
	t.m.SetRNG(rand.New(rand.NewPCG(t.seed^t.stream, uint64(step))))
	if err := t.Run(); err != nil {
		return 0, err
	}
	loss := trainer.ScalarValue(t.loss)
	params := t.Params()
	trainer.ClipGlobalNorm(params, s.clip)
	s.opt.Step(params, lr)
	t.AfterUpdate()
	return loss, nil
}

// Close releases the graph's machine.
func (s *BiStep) Close() { s.t.Close() }
