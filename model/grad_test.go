package model

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// loraStepGrads builds the tiny LLaMA's log-likelihood with LoRA adapters on every target (and
// dropout on), differentiates it with grad wrt the adapters only and runs it once: the loss, the
// adapters' gradients, the graph's node count and the flops of its matrix products.
func loraStepGrads(t *testing.T, grad func(*gorgonia.Node, ...*gorgonia.Node) (gorgonia.Nodes, error)) (float32, [][]float32, int, float64) {
	t.Helper()
	m, err := NewLlama(tinyLlamaConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	l := randomLoRA(t, m, LoRAConfig{Rank: 2, Alpha: 3, Dropout: 0.25, Targets: allLoRATargets}, 0.5)
	l.Train = true
	l.RNG = &RNG{R: rand.New(rand.NewPCG(3, 4))}
	g := gorgonia.NewGraph()
	b := NewBinder(g)
	loss := tinyLogLik(t, m, b, tensor.Float32)
	var nodes gorgonia.Nodes
	for _, p := range l.Params() {
		nodes = append(nodes, b.Node(p))
	}
	gs, err := grad(loss, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != len(nodes) {
		t.Fatalf("%d gradients for %d nodes", len(gs), len(nodes))
	}
	vm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(nodes...))
	defer vm.Close()
	CountGEMM(true)
	defer CountGEMM(false)
	GEMMCounts()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	flops, _ := GEMMCounts()
	var out [][]float32
	for _, n := range gs {
		out = append(out, append([]float32(nil), n.Value().Data().([]float32)...))
	}
	return loss.Value().Data().(float32), out, len(g.AllNodes()), flops
}

// TestGradSkipsUnneededTerms: Grad wrt LoRA adapters gives gorgonia.Grad's loss and gradients bit
// for bit, with fewer nodes and exactly the matrix products of the frozen weights' gradients
// (gᵀ·x) and of the embeddings' gradient through block 0's adapters left out.
func TestGradSkipsUnneededTerms(t *testing.T) {
	wantLoss, want, wantNodes, wantFlops := loraStepGrads(t, gorgonia.Grad)
	gotLoss, got, gotNodes, gotFlops := loraStepGrads(t, Grad)
	if gotLoss != wantLoss {
		t.Fatalf("loss %v, gorgonia.Grad's %v", gotLoss, wantLoss)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("gradient %d[%d] = %v, gorgonia.Grad's %v", i, j, got[i][j], want[i][j])
			}
		}
	}
	c := tinyLlamaConfig()
	N, H, F, r, kv := 8, c.Hidden, c.FFN, 2, c.KVHeads*c.HeadDim()
	// Block 0's q, k and v read the embeddings, which no adapter reaches: Gorgonia never
	// differentiates those three products. Every other frozen projection's dW is left out, and
	// so is the gradient of the dropped-out embeddings through block 0's q, k and v adapters.
	frozen := 2 * N * (c.Layers*(H*H+2*kv*H+H*H+3*H*F) - (H*H + 2*kv*H))
	adapterDX := 2 * N * r * 3 * H
	if d := wantFlops - gotFlops; d != float64(frozen+adapterDX) {
		t.Errorf("Grad saved %g flops, want %d (frozen dW %d + block 0's adapter dx %d); %g -> %g", d, frozen+adapterDX, frozen, adapterDX, wantFlops, gotFlops)
	}
	if gotNodes >= wantNodes {
		t.Errorf("%d nodes with Grad, %d without", gotNodes, wantNodes)
	}
	t.Logf("nodes %d -> %d, GEMM flops %g -> %g", wantNodes, gotNodes, wantFlops, gotFlops)
}
