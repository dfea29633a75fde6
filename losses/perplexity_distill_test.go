package losses

import "testing"

// TestPerplexityDistillGolden: through the table, perplexity_distill is the PyTorch RePlug KL
// case (the reader's log-likelihoods as the teacher, TeacherTemperature = tau_lm).
func TestPerplexityDistillGolden(t *testing.T) {
	c := goldenCases(t, "replug_kl")[0]
	s, ss := c.array(t, "retriever_scores")
	lm, _ := c.array(t, "lm_loglik")
	gs, _ := c.array(t, "grad_retriever_scores")
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			rtol, atol := tolerances(dt)
			loss, grads := mustEval(t, dt, registeredBuilder("perplexity_distill", ss[0], ss[1], lm, c.num(t, "tau_retriever"), c.num(t, "tau_lm")),
				input{"s", []int{ss[0] * ss[1]}, s, true})
			wantLoss(t, loss, c.num(t, "loss"), rtol)
			assertClose(t, "grad_retriever_scores", grads["s"], gs, rtol, atol)
		})
	}
}
