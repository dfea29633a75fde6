package readerlm

import (
	"math"
	"testing"

	"github.com/ragtrain/ragtrain/model"
)

// TestMicroBatchGradients: a step of 5 texts of different lengths run in passes of 2 (2, 2, 1)
// and of 1 gives the loss and every gradient of the one-pass step (the mean NLL over the step's
// target tokens) within float32 summation error, in full fine-tuning and with LoRA adapters
// (dropout 0: the masks are the only thing drawn pass by pass); and the gradients are those of
// central finite differences of the one-pass loss on a few entries.
func TestMicroBatchGradients(t *testing.T) {
	cfg := model.LlamaConfig{Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, FFN: 24, Vocab: 50,
		RopeTheta: 10000, RMSEps: 1e-5, MaxPosition: 64, TieEmbeddings: true}
	seqs := [][]int{{3, 9, 14, 2}, {5, 6, 7, 8, 9, 10, 2}, {11, 2}, {40, 41, 42, 43, 2}, {1, 20, 30, 2}}
	for _, lora := range []bool{false, true} {
		step := func(micro int) (float64, [][]float32, *model.Llama, *lmTask) {
			m, err := model.NewLlama(cfg, 5)
			if err != nil {
				t.Fatal(err)
			}
			trainable := m.Params()
			if lora {
				l, err := model.NewLlamaLoRA(m, model.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj", "down_proj"}}, 9)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range l.Params() { // B away from 0, so that A's gradient is not 0
					d := p.Value.Data().([]float32)
					for i := range d {
						d[i] = float32(math.Sin(float64(i*7+len(p.Name)))) * 0.3
					}
				}
				l.RNG = &model.RNG{}
				m.AttachLoRA(l)
				trainable = l.Params()
			}
			// B = len(seqs): step 0's batch is every text, in epoch 0's order (the same for every micro)
			task, err := newLMTask(m, len(seqs), micro, 8, seqs, 1, trainable, false)
			if err != nil {
				t.Fatal(err)
			}
			loss, n, err := task.Step(0)
			if err != nil || n != len(seqs) {
				t.Fatal(n, err)
			}
			var grads [][]float32
			for _, p := range task.Params() {
				grads = append(grads, append([]float32(nil), p.Grad...))
			}
			return loss, grads, m, task
		}
		want, wg, m, task := step(len(seqs))
		for _, micro := range []int{2, 1} {
			got, gg, _, _ := step(micro)
			if math.Abs(got-want) > 1e-6*math.Abs(want) {
				t.Errorf("lora=%t micro %d: loss %.9g, one pass %.9g", lora, micro, got, want)
			}
			worst := 0.0
			for i := range wg {
				for j := range wg[i] {
					worst = max(worst, math.Abs(float64(gg[i][j]-wg[i][j]))/(1e-3+math.Abs(float64(wg[i][j]))))
				}
			}
			if worst > 1e-4 {
				t.Errorf("lora=%t micro %d: gradients differ from one pass by %.3g (relative)", lora, micro, worst)
			}
			t.Logf("lora=%t micro %d: loss %.7f vs %.7f, worst relative gradient difference %.2g", lora, micro, got, want, worst)
		}
		// finite differences of the one-pass loss, in float64 over float32 values: a coarse check
		// that the accumulated gradient is the step's
		ps := task.Params()
		for _, i := range []int{0, len(ps) - 1} {
			v := ps[i].Value
			j := len(v) / 3
			old := v[j]
			const h = 1e-2
			v[j] = old + h
			up := evalLoss(t, m, seqs)
			v[j] = old - h
			down := evalLoss(t, m, seqs)
			v[j] = old
			fd := (up - down) / (2 * h)
			if g := float64(wg[i][j]); math.Abs(fd-g) > 2e-2*max(1e-2, math.Abs(g)) {
				t.Errorf("lora=%t %s[%d]: gradient %.6g, finite difference %.6g", lora, ps[i].Name, j, g, fd)
			}
		}
	}
}

// evalLoss is the mean NLL of texts, one forward pass (no dropout).
func evalLoss(t *testing.T, m *model.Llama, texts [][]int) float64 {
	t.Helper()
	train := false
	if l := m.LoRA(); l != nil {
		train, l.Train = l.Train, false
		defer func() { l.Train = train }()
	}
	p, err := newPerplexity(m, len(texts), 8)
	if err != nil {
		t.Fatal(err)
	}
	ppl, err := p.run(texts)
	if err != nil {
		t.Fatal(err)
	}
	return math.Log(ppl)
}
