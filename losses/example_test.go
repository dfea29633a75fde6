package losses_test

import (
	"fmt"

	"github.com/ragtrain/ragtrain/losses"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// One query whose positive scores 1 and whose only negative scores 0, tau = 1:
// L = -log(e/(e+1)) = 0.3133, dL/dq = (-1/(1+e), 1/(1+e)).
func ExampleInfoNCE() {
	g := G.NewGraph()
	q := G.NewMatrix(g, tensor.Float32, G.WithShape(1, 2), G.WithName("q"),
		G.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 0}))))
	p := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 2), G.WithName("p"),
		G.WithValue(tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 0, 0, 1}))))
	loss, err := losses.InfoNCE(q, p, 1, losses.Dot)
	if err != nil {
		panic(err)
	}
	if _, err := G.Grad(loss, q, p); err != nil {
		panic(err)
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(q, p))
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		panic(err)
	}
	dq, _ := q.Grad()
	fmt.Printf("loss %.4f\n", loss.Value().Data())
	fmt.Printf("dL/dq %.4f\n", dq.Data())
	// Output:
	// loss 0.3133
	// dL/dq [-0.2689 0.2689]
}

// The worked RAG example: retrieval weights (0.6, 0.4), token probabilities (0.9, 0.2) under
// the first passage and (0.1, 0.8) under the second.
func ExampleRAGSequence() {
	g := G.NewGraph()
	s := G.NewMatrix(g, tensor.Float64, G.WithShape(1, 2), G.WithName("s"),
		G.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{0.6, 0.4}))))
	logS, _ := G.Log(s) // softmax(log w) = w
	logp := G.NewTensor(g, tensor.Float64, 3, G.WithShape(1, 2, 2), G.WithName("logp"),
		G.WithValue(tensor.New(tensor.WithShape(1, 2, 2), tensor.WithBacking([]float64{0.9, 0.2, 0.1, 0.8}))))
	logP, _ := G.Log(logp)
	mask := G.NewMatrix(g, tensor.Float64, G.WithShape(1, 2), G.WithName("mask"),
		G.WithValue(tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float64{1, 1}))))
	seq, _ := losses.RAGSequence(logS, logP, mask)
	tok, _ := losses.RAGToken(logS, logP, mask)
	gamma, _ := losses.RAGPosterior(logS, logP, mask)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		panic(err)
	}
	fmt.Printf("RAG-Sequence %.4f = -ln 0.14\n", seq.Value().Data())
	fmt.Printf("RAG-Token %.4f = -ln 0.2552\n", tok.Value().Data())
	fmt.Printf("gamma %.4f\n", gamma.Value().Data())
	// Output:
	// RAG-Sequence 1.9661 = -ln 0.14
	// RAG-Token 1.3657 = -ln 0.2552
	// gamma [0.7714 0.2286]
}
