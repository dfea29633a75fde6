package biencoder

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/ragtrain/ragtrain/losses"
	"github.com/ragtrain/ragtrain/model"
)

// TestInfoNCEWeight: a distillation loss with loss.infonce_weight w is the distillation loss
// plus w times InfoNCE over the whole batch (candidate mask included), in value and in every
// parameter's gradient of a two-layer Transformer (float64, 1e-9), for margin_mse (one hard
// negative) and kl_distill (two); and the cached (GradCache) step of the sum equals its full
// batch (1e-6), as the gradient-equality rule asks of every loss it trains.
func TestInfoNCEWeight(t *testing.T) {
	const B, vocab, w = 4, 40, 0.7
	lens := Lengths{Query: 6, Passage: 10}
	cfg := model.EncoderConfig{Encoder: "transformer", Vocab: vocab, Hidden: 16, Layers: 2, Heads: 2, FFN: 32, MaxPosition: 16}
	for _, tc := range []struct {
		name string
		M    int
	}{{"margin_mse", 1}, {"kl_distill", 2}} {
		spec, err := losses.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		N := B * (1 + tc.M)
		distill := ContrastiveLoss{spec: spec, Temperature: 0.05, Similarity: losses.Cosine, TeacherTemperature: 2}
		combined := distill
		combined.InfoNCEWeight = w
		nce, err := infoNCE(0.05, losses.Cosine)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(11, uint64(tc.M)))
		q, p := randomBatch(r, B, lens.Query, vocab), randomBatch(r, N, lens.Passage, vocab)
		pb := PairBatch{Mask: make([]float32, B*N), Teacher: make([]float32, B*(1+tc.M))}
		for i := range pb.Mask {
			pb.Mask[i] = 1
		}
		pb.Mask[1*N+2] = 0 // a false negative: passage 2 is judged relevant to query 1
		for i := range pb.Teacher {
			pb.Teacher[i] = float32(r.NormFloat64() * 3)
		}
		m, err := model.NewBiEncoderOf(cfg, true, 5, tensor.Float64)
		if err != nil {
			t.Fatal(err)
		}
		lD, gD := fullBatchGradients(t, m, lens, distill, true, pb, q, p)
		lN, gN := fullBatchGradients(t, m, lens, nce, true, pb, q, p)
		lC, gC := fullBatchGradients(t, m, lens, combined, true, pb, q, p)
		if lN <= 0 || lD <= 0 {
			t.Fatalf("%s: distillation loss %v, InfoNCE %v: want both > 0", tc.name, lD, lN)
		}
		if want := lD + w*lN; math.Abs(lC-want) > 1e-9*math.Abs(want) {
			t.Fatalf("%s: loss with infonce_weight %v = %v, want %v + %v * %v = %v", tc.name, w, lC, lD, w, lN, want)
		}
		// Without the mask the InfoNCE term differs: the mask reaches it.
		lU, _ := fullBatchGradients(t, m, lens, combined, false, PairBatch{Teacher: pb.Teacher}, q, p)
		if lU == lC {
			t.Fatalf("%s: the candidate mask changed nothing in the InfoNCE term (%v)", tc.name, lU)
		}
		for name, g := range gC {
			for i := range g {
				want := gD[name][i] + w*gN[name][i]
				if math.Abs(g[i]-want) > 1e-9*math.Max(1e-3, math.Abs(want)) {
					t.Fatalf("%s: %s[%d]: gradient %v, want %v + %v * %v", tc.name, name, i, g[i], gD[name][i], w, gN[name][i])
				}
			}
		}
		task, err := NewCachedBiTask(m, nil, TaskOptions{B: B, N: N, MiniBatch: 2, Lengths: lens, Loss: combined, Masked: true, Seed: 1, Stream: StreamTrain})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := task.StepTokens(0, pb, q, p)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-lC) > 1e-9*math.Abs(lC) {
			t.Fatalf("%s: cached loss %v, full batch %v", tc.name, got, lC)
		}
		for name, want := range gC {
			g := task.gradient(name)
			for i := range want {
				if d := math.Abs(g[i] - want[i]); d > 1e-6 {
					t.Fatalf("%s: %s[%d]: cached gradient %v, full batch %v", tc.name, name, i, g[i], want[i])
				}
			}
		}
		task.Close()
	}
}
