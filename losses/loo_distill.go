package losses

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
)

// LeaveOneOutDistill trains the retriever to rank passages by how much the reader's loss
// worsens when each one is removed from its K-passage context (leave-one-out perplexity
// distillation, LOOP).
//
//	o_bk   = -log p_LM(y_b | D_b \ {d_bk}, x_b)     the reader's loss without passage k
//	p_LOOP = softmax(o_b / tauT)                     a constant
//	p_R    = softmax(s_b / tauR)
//	L      = mean_b KL(p_LOOP || p_R)
//
// A passage whose removal raises the loss most gets the most teacher mass. Softmax is invariant
// to a per-query offset, so o_bk and LeaveOneOut's o_bk - (-log p_LM(y_b | D_b, x_b)) (how much
// the loss worsens) give the same loss. Inputs: s [B,K] the retriever's scores; o [B,K] the
// leave-one-out losses (LeaveOneOut), same dtype; tauR, tauT > 0. o receives no gradient; the
// gradient on s_b is (p_R,b - p_LOOP,b) / (tauR B).
//
// Reference: Izacard et al. 2022, "Atlas: Few-shot Learning with Retrieval Augmented Language
// Models", section 2.2 ("Leave-one-out Perplexity Distillation", eq. for p_LOOP).
//
// Prefer it to perplexity distillation (PerplexityDistill) when the reader reads its K passages
// together, so that a passage's worth depends on the others: a passage that repeats another is
// worth little once the other is there. It costs K+1 reader passes per question.
func LeaveOneOutDistill(s, o *G.Node, tauR, tauT float64) (*G.Node, error) {
	return softKL("LeaveOneOutDistill", [4]string{"s", "o", "tauR", "tauT"}, s, o, tauR, tauT)
}

// LeaveOneOut returns the teacher scores of LeaveOneOutDistill for one question's K passages:
// o_k = loss(every passage but k) - loss(all K), how much the reader's loss worsens without
// passage k. loss(keep) is the reader's loss (in nats, -log p(y | passages keep, x)) given the
// passages keep, indices into 0..K-1 in increasing order; it is called K+1 times. K must be at
// least 2.
func LeaveOneOut(K int, loss func(keep []int) (float64, error)) ([]float64, error) {
	if K < 2 {
		return nil, fmt.Errorf("losses: LeaveOneOut: K = %d passages, want at least 2", K)
	}
	all := make([]int, K)
	for i := range all {
		all[i] = i
	}
	full, err := loss(all)
	if err != nil {
		return nil, err
	}
	out := make([]float64, K)
	keep := make([]int, 0, K-1)
	for k := range K {
		keep = append(append(keep[:0], all[:k]...), all[k+1:]...)
		l, err := loss(keep)
		if err != nil {
			return nil, err
		}
		out[k] = l - full
	}
	return out, nil
}

// MixtureLoss is the loss function of LeaveOneOut for a reader that reads one passage at a
// time (as the garden reader does) and answers from a set of passages by the RAG mixture with
// uniform weights: loss(keep) = -log (1/|keep|) sum_{k in keep} p(y | d_k, x), from the answer's
// log-likelihoods loglik [K] given each passage alone, computed in log space (max-subtracted).
//
// For this reader removing passage k changes the loss by log mean_{all} p - log mean_{-k} p,
// which grows with p(y | d_k, x): the teacher orders passages as perplexity distillation does,
// but its distribution differs (a passage as good as the rest costs nothing to remove).
func MixtureLoss(loglik []float64) func(keep []int) (float64, error) {
	return func(keep []int) (float64, error) {
		if len(keep) == 0 {
			return 0, fmt.Errorf("losses: MixtureLoss: no passage kept")
		}
		m := math.Inf(-1)
		for _, k := range keep {
			if k < 0 || k >= len(loglik) {
				return 0, fmt.Errorf("losses: MixtureLoss: passage %d of %d", k, len(loglik))
			}
			m = math.Max(m, loglik[k])
		}
		if math.IsInf(m, -1) {
			return math.Inf(1), nil
		}
		var sum float64
		for _, k := range keep {
			sum += math.Exp(loglik[k] - m)
		}
		return -(m + math.Log(sum/float64(len(keep)))), nil
	}
}

// loo_distill: Inputs.Scores [B*K] the retriever's scores, Teacher [B,K] the leave-one-out
// losses (LeaveOneOut), TeacherTemperature their temperature.
func init() { registerListTeacher("loo_distill", LeaveOneOutDistill) }
