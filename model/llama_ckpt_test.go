package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
)

// ckptPasses runs the training graph of m (checkpointed or not) for two passes of B x L tokens
// (the second accumulating its gradients onto the first's, as reader_lm's micro-batches do) and
// returns the two losses, the gradients of trainable and the bytes the graph's buffer arena
// allocated (the activations and gradients held at once).
func ckptPasses(t *testing.T, m *Llama, trainable []*Param, ckpt bool, B, L int) ([]float32, [][]float32, int) {
	t.Helper()
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	in := NewInputs(g, B, L, "in")
	M := B * (L - 1)
	tg := NewTargets(g, M, "tgt")
	var lp *gorgonia.Node
	var ck *LlamaCheckpointed
	var err error
	if ckpt {
		if ck, err = m.BuildLogProbsCheckpointed(b, in, tg); err == nil {
			lp = ck.LogProbs()
		}
	} else {
		lp, err = m.BuildLogProbs(b, in, tg)
	}
	if err != nil {
		t.Fatal(err)
	}
	loss, err := gorgonia.Sum(lp)
	if err != nil {
		t.Fatal(err)
	}
	var nodes gorgonia.Nodes
	for _, p := range trainable {
		nodes = append(nodes, b.Node(p))
	}
	if ckpt {
		err = ck.Grad(loss, nodes...)
	} else {
		_, err = gorgonia.Grad(loss, nodes...)
	}
	if err != nil {
		t.Fatal(err)
	}
	ShareBuffers(g, loss)
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(nodes...))
	defer vm.Close()
	if l := m.LoRA(); l != nil {
		l.RNG.R = rand.New(rand.NewPCG(7, 8))
	}
	r := rand.New(rand.NewPCG(3, 4))
	var losses []float32
	for pass := 0; pass < 2; pass++ {
		ids, mask := make([]int, B*L), make([]float32, B*L)
		pos, tgt := make([]int, M), make([]int, M)
		for row := 0; row < B; row++ {
			n := L - row%3 // rows of different lengths, right-padded
			for i := 0; i < n; i++ {
				ids[row*L+i], mask[row*L+i] = r.IntN(m.Cfg.Vocab), 1
			}
			for i := 0; i < L-1; i++ {
				k := row*(L-1) + i
				pos[k] = -1
				if i+1 < n {
					pos[k], tgt[k] = row*L+i, ids[row*L+i+1]
				}
			}
		}
		if err := in.Let(ids, mask, nil); err != nil {
			t.Fatal(err)
		}
		if err := tg.Let(pos, tgt); err != nil {
			t.Fatal(err)
		}
		if pass > 0 {
			vm.Reset()
		}
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss.Value().Data().(float32))
	}
	var grads [][]float32
	for _, n := range nodes {
		gv, err := n.Grad()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, append([]float32(nil), gv.Data().([]float32)...))
	}
	bytes := 0
	for _, n := range g.AllNodes() {
		if o, ok := n.Op().(*customOp); ok && o.ar != nil {
			bytes = o.ar.bytes
			break
		}
	}
	return losses, grads, bytes
}

// TestLlamaCheckpointedEqual: with gradient checkpointing, the losses of two accumulated passes
// and the gradients of every trainable tensor equal those of the plain graph bit for bit: full
// fine-tuning with tied and untied embeddings, LoRA (all seven targets) with dropout, LoRA on
// v_proj alone, and the last layer's weights alone (the backward stops at that layer); the
// checkpointed graph's buffer arena holds less (under half at 8 layers).
func TestLlamaCheckpointedEqual(t *testing.T) {
	for _, c := range []struct {
		name    string
		tie     bool
		lora    []string
		layers  int
		dropout float64
		only    string // trainable: the parameters whose names have this prefix
	}{
		{"full tied", true, nil, 3, 0, ""},
		{"full untied", false, nil, 3, 0, ""},
		{"lora dropout", true, allLoRATargets, 3, 0.3, ""},
		{"lora v_proj", true, []string{"v_proj"}, 3, 0, ""},
		{"layer 2 only", true, nil, 3, 0, "model.layers.2."},
		{"full 8 layers", true, nil, 8, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyLlamaConfig()
			cfg.TieEmbeddings, cfg.Layers = c.tie, c.layers
			run := func(ckpt bool) ([]float32, [][]float32, int) {
				m, err := NewLlama(cfg, 11)
				if err != nil {
					t.Fatal(err)
				}
				perturbNorms(m, 12)
				trainable := m.Params()
				if c.lora != nil {
					l := randomLoRA(t, m, LoRAConfig{Rank: 2, Alpha: 4, Dropout: c.dropout, Targets: c.lora}, 0.3)
					l.Train, l.RNG = true, &RNG{}
					trainable = l.Params()
				}
				if c.only != "" {
					trainable = slices.DeleteFunc(trainable, func(p *Param) bool { return !strings.HasPrefix(p.Name, c.only) })
				}
				return ckptPasses(t, m, trainable, ckpt, 3, 7)
			}
			l0, g0, b0 := run(false)
			l1, g1, b1 := run(true)
			for i := range l0 {
				if math.Float32bits(l0[i]) != math.Float32bits(l1[i]) || math.IsNaN(float64(l0[i])) {
					t.Fatalf("pass %d: loss %v checkpointed, %v plain", i, l1[i], l0[i])
				}
			}
			for i := range g0 {
				nonzero := false
				for j := range g0[i] {
					if math.Float32bits(g0[i][j]) != math.Float32bits(g1[i][j]) {
						t.Fatalf("gradient %d element %d: %v checkpointed, %v plain", i, j, g1[i][j], g0[i][j])
					}
					nonzero = nonzero || g0[i][j] != 0
				}
				if !nonzero && c.lora == nil {
					t.Fatalf("gradient %d is zero", i)
				}
			}
			t.Logf("losses %v, %d gradients equal; arena %d bytes plain, %d checkpointed", l0, len(g0), b0, b1)
			if c.layers == 8 && !(b1 < b0/2) {
				t.Errorf("arena %d bytes checkpointed, %d plain: want under half", b1, b0)
			}
		})
	}
}
