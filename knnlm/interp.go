package knnlm

import (
	"fmt"
	"math"
)

// KNNProbs is p_kNN over the neighbours nb (Khandelwal et al. 2020, eq. 2): each neighbour
// weighs exp(-d_i / temperature), the weights are normalised over nb, and neighbours with the
// same value add up:
//
//	p_kNN(v) = Σ_{i: v_i = v} exp(-d_i / T) / Σ_i exp(-d_i / T)
//
// The result maps value -> probability (summing to 1); empty for no neighbours. The weights are
// computed relative to the nearest distance, so they do not underflow. temperature must be > 0.
func KNNProbs(nb []Neighbor, temperature float64) map[int]float64 {
	p := make(map[int]float64, len(nb))
	if len(nb) == 0 {
		return p
	}
	if !(temperature > 0) {
		panic(fmt.Sprintf("knnlm: temperature %g, want > 0", temperature))
	}
	d0 := math.Inf(1)
	for _, n := range nb {
		d0 = math.Min(d0, float64(n.Dist))
	}
	var z float64
	for _, n := range nb {
		w := math.Exp(-(float64(n.Dist) - d0) / temperature)
		p[n.Value] += w
		z += w
	}
	for v := range p {
		p[v] /= z
	}
	return p
}

// LogSoftmax writes log softmax(logits) into dst (both [V]).
func LogSoftmax(dst, logits []float64) {
	m := math.Inf(-1)
	for _, x := range logits {
		m = math.Max(m, x)
	}
	var s float64
	for _, x := range logits {
		s += math.Exp(x - m)
	}
	lz := m + math.Log(s)
	for i, x := range logits {
		dst[i] = x - lz
	}
}

// Mix is log(λ p_kNN + (1 - λ) p_LM) of one token from p_kNN (a probability) and log p_LM (eq.
// 3), computed without leaving log space for p_LM: λ = 0 gives logLM exactly; a token with
// p_kNN = 0 gets log(1 - λ) + logLM; λ = 1 gives log p_kNN (-Inf where it is 0). lambda must be
// in [0, 1].
func Mix(pKNN, logLM, lambda float64) float64 {
	switch {
	case lambda == 0:
		return logLM
	case lambda == 1:
		return math.Log(pKNN)
	case pKNN == 0:
		return math.Log1p(-lambda) + logLM
	}
	a, b := math.Log(lambda)+math.Log(pKNN), math.Log1p(-lambda)+logLM
	if a < b {
		a, b = b, a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// Interpolate writes the kNN-LM's log-probabilities of every token into dst [V] from the LM's
// log-probabilities logLM [V] and p_kNN (KNNProbs; values outside [0, V) are an error).
func Interpolate(dst, logLM []float64, pKNN map[int]float64, lambda float64) error {
	if !(lambda >= 0 && lambda <= 1) {
		return fmt.Errorf("knnlm: lambda %g, want [0, 1]", lambda)
	}
	for v := range pKNN {
		if v < 0 || v >= len(logLM) {
			return fmt.Errorf("knnlm: neighbour value %d outside the vocabulary [0,%d)", v, len(logLM))
		}
	}
	for v, l := range logLM {
		dst[v] = Mix(pKNN[v], l, lambda)
	}
	return nil
}
