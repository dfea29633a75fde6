package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func inBatchBuilder(in map[string]*G.Node) (*G.Node, error) {
	return RAGSequenceInBatch(in["s"], in["drop"], in["logp"], in["mask"])
}

// TestRAGSequenceInBatchIsRAGSequenceForOneQuestion: with B = 1 the batch's candidates are the
// question's own, and the loss and gradient are the golden RAG-Sequence case's, row by row.
func TestRAGSequenceInBatchIsRAGSequenceForOneQuestion(t *testing.T) {
	c := goldenCases(t, "rag")[0]
	s, _ := c.array(t, "retrieval_logits")
	lp, ls := c.array(t, "target_logprobs")
	m, _ := c.array(t, "mask")
	B, K, T := ls[0], ls[1], ls[2]
	for b := range B {
		one := func(in map[string]*G.Node) (*G.Node, error) { return RAGSequence(in["s"], in["logp"], in["mask"]) }
		ins := []input{{"s", []int{1, K}, s[b*K : (b+1)*K], true}, {"logp", []int{1, K, T}, lp[b*K*T : (b+1)*K*T], false}, {"mask", []int{1, T}, m[b*T : (b+1)*T], false}}
		want, wantG := mustEval(t, tensor.Float64, one, ins...)
		got, gotG := mustEval(t, tensor.Float64, inBatchBuilder, append(ins, input{"drop", []int{1, K}, make([]float64, K), false})...)
		wantLoss(t, got, want, 1e-12)
		assertClose(t, "dL/ds", gotG["s"], wantG["s"], 1e-12, 1e-15)
	}
}

// TestRAGSequenceInBatchHandComputed: two questions, one candidate each (K = 1), every logit 0.
// Question 0's candidate explains its answer with probability 0.5; the other question's
// candidate is a negative: p = 1/2 each, L_0 = -log(0.5 * 0.5). Question 1's answer has
// probability 0.2 and the other column is dropped: p = 1 on its own, L_1 = -log 0.2. Gradient:
// row 0 (p - gamma)/2 = ((0.5-1)/2, 0.5/2); row 1 0 on its own column (p = gamma = 1), 0 on the
// dropped one.
func TestRAGSequenceInBatchHandComputed(t *testing.T) {
	for _, dt := range dtypes {
		rtol, atol := tolerances(dt)
		loss, grads := mustEval(t, dt, inBatchBuilder,
			input{"s", []int{2, 2}, []float64{0, 0, 0, 0}, true},
			input{"drop", []int{2, 2}, []float64{0, 0, 1, 0}, false},
			input{"logp", []int{2, 1, 1}, []float64{math.Log(0.5), math.Log(0.2)}, false},
			input{"mask", []int{2, 1}, []float64{1, 1}, false})
		wantLoss(t, loss, (-math.Log(0.25)-math.Log(0.2))/2, rtol)
		assertClose(t, "dL/ds", grads["s"], []float64{-0.25, 0.25, 0, 0}, rtol, atol)
	}
}

func TestRAGSequenceInBatchFiniteDifference(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 58))
	B, K, T := 3, 2, 2
	drop := make([]float64, B*B*K)
	drop[0*B*K+3] = 1 // question 0 leaves out question 1's second candidate
	checkFiniteDiff(t, inBatchBuilder, 1e-6, 1e-9,
		input{"s", []int{B, B * K}, randn(r, B*B*K, 1), true},
		input{"drop", []int{B, B * K}, drop, false},
		input{"logp", []int{B, K, T}, randn(r, B*K*T, 1), true},
		input{"mask", []int{B, T}, []float64{1, 1, 1, 0, 1, 1}, false})
}

// TestBatchRetrievalLogitsBlocks: the own blocks of BatchRetrievalLogits are RetrievalLogits.
func TestBatchRetrievalLogitsBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(59, 60))
	B, K, H := 2, 3, 4
	q, d := randn(r, B*H, 1), randn(r, B*K*H, 1)
	for _, sim := range []Similarity{Dot, Cosine} {
		all, _ := evalValue(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) { return BatchRetrievalLogits(in["q"], in["d"], 0.5, sim) },
			input{name: "q", shape: []int{B, H}, data: q}, input{name: "d", shape: []int{B * K, H}, data: d})
		own, _ := evalValue(t, tensor.Float64, func(in map[string]*G.Node) (*G.Node, error) { return RetrievalLogits(in["q"], in["d"], K, 0.5, sim) },
			input{name: "q", shape: []int{B, H}, data: q}, input{name: "d", shape: []int{B * K, H}, data: d})
		for b := range B {
			for k := range K {
				if got, want := all[b*B*K+b*K+k], own[b*K+k]; math.Abs(got-want) > 1e-12 {
					t.Errorf("%v: s[%d][%d] = %g, RetrievalLogits %g", sim, b, b*K+k, got, want)
				}
			}
		}
	}
}
