package fusion

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"

	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/trainer"
)

// memorySpread is the spread of FiD's encoder memory over ex: the rms distance of each real
// memory row (every unmasked token of every passage) from its question's mean row, over the
// rms norm of the rows. 0: every row of a question is one vector.
func memorySpread(t *testing.T, s *fidStudy, ex []fidExample) float64 {
	t.Helper()
	g := gorgonia.NewGraph()
	in := s.fid.NewFiDInputs(g, len(ex), "spread")
	mem, err := s.fid.BuildEncoder(model.NewBinder(g), in.Enc, false)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]model.FiDExample, len(ex))
	cut := 0
	for i, e := range ex {
		xs[i], _ = s.fidInput(e, &cut)
	}
	if err := in.Let(xs, s.Format.Cls); err != nil {
		t.Fatal(err)
	}
	vm := gorgonia.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	m, mask := mem.Value().Data().([]float32), in.MemMask.Value().Data().([]float32)
	H, KL := s.fid.Cfg.Hidden, s.fid.Cfg.K*s.fid.Cfg.EncLen
	var dev, norm float64
	for b := range ex {
		mu, n := make([]float64, H), 0.0
		for r := b * KL; r < (b+1)*KL; r++ {
			if mask[r] != 0 {
				n++
				for h := 0; h < H; h++ {
					mu[h] += float64(m[r*H+h])
				}
			}
		}
		for r := b * KL; r < (b+1)*KL; r++ {
			if mask[r] != 0 {
				for h := 0; h < H; h++ {
					d := float64(m[r*H+h])
					dev += (d - mu[h]/n) * (d - mu[h]/n)
					norm += d * d
				}
			}
		}
	}
	return math.Sqrt(dev / norm)
}

// TestFiDEncoderCollapse trains the shipped recipe's FiD (garden world, hidden 128, K = 10) for
// 25 steps of its schedule (AdamW, lr warming up to 2e-3) and measures its encoder memory's
// spread: with the encoder at the full lr (fid.encoder_lr_scale = 1) the memory collapses
// towards one vector (0.93 at initialisation, 0.08 after 25 steps: the loss gradient on every
// memory row of a question is nearly the same vector while the cross-attention is uniform,
// and Adam turns it into full-size steps); at 0.1 x lr, the shipped value, it keeps most of
// its spread (0.83), so the cross-attention can still learn to pick a token.
func TestFiDEncoderCollapse(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("2 x 25 training steps of the garden FiD")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "recipes", "fusion-garden.toml"))
	if err != nil {
		t.Fatal(err)
	}
	spread := map[float64][2]float64{}
	for _, scale := range []float64{1, 0.1} {
		text := strings.Replace(string(b), `output_dir = "../runs"`, `output_dir = "`+filepath.ToSlash(t.TempDir())+`"`, 1)
		text = strings.Replace(text, "\nonly = false", "\nonly = true", 1)
		text = strings.Replace(text, "\nencoder_lr_scale = 0.1", "\nencoder_lr_scale = "+map[float64]string{1: "1", 0.1: "0.1"}[scale], 1)
		rec, err := testkit.LoadText(t, filepath.Join(t.TempDir(), "fusion-garden.toml"), text)
		if err != nil {
			t.Fatal(err)
		}
		if fc := FiDOf(rec); !fc.Only || fc.EncoderLRScale != scale {
			t.Fatalf("recipe edit: only %v, encoder_lr_scale %g", fc.Only, fc.EncoderLRScale)
		}
		s, trainQ, top := trainingStudy(t, rec)
		task, err := newFiDTask(s, func(step int) []fidExample { return s.examples(trainQ, top, step) })
		if err != nil {
			t.Fatal(err)
		}
		probe := s.examples(trainQ, top, 1<<20)
		before := memorySpread(t, s, probe)
		opt, warm := trainer.NewAdamW(rec.Train.WeightDecay), experiment.ShortWarmup(rec.Train.WarmupSteps, s.fc.Steps)
		for step := 0; step < 25; step++ {
			if _, _, err := task.Step(step); err != nil {
				t.Fatal(err)
			}
			trainer.ClipGlobalNorm(task.Params(), rec.Train.GradClip)
			opt.Step(task.Params(), s.fc.LR*float64(step+1)/float64(warm))
			task.AfterUpdate()
		}
		task.Close()
		spread[scale] = [2]float64{before, memorySpread(t, s, probe)}
	}
	t.Logf("memory spread before -> after 25 steps: encoder at lr %.4f -> %.4f, at 0.1 x lr %.4f -> %.4f", spread[1][0], spread[1][1], spread[0.1][0], spread[0.1][1])
	if spread[1][0] < 0.8 || spread[1][0] != spread[0.1][0] {
		t.Errorf("initial spread %v and %v, want the same and > 0.8", spread[1][0], spread[0.1][0])
	}
	if spread[1][1] > 0.2 {
		t.Errorf("encoder at the full lr: spread %.4f after 25 steps, want the collapse (< 0.2)", spread[1][1])
	}
	if spread[0.1][1] < 0.6 {
		t.Errorf("encoder at 0.1 x lr: spread %.4f after 25 steps, want > 0.6", spread[0.1][1])
	}
}
