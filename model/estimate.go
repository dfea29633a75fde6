package model

import "math"

// MemoryEstimate is what training a model takes, in bytes of float32: the parameters, their
// gradients and AdamW's two moments (Optimizer = 3 x Params), and the activations one step keeps
// for its backward pass (Activations). It is an estimate from the shapes alone, made before
// anything is allocated, in the manner of DeepSpeed's estimate_zero*_model_states_mem_needs; the
// runtime adds its own overhead on top. Values saturate at math.MaxInt64 instead of overflowing.
type MemoryEstimate struct {
	Params, Optimizer, Activations int64
}

// Total is Params + Optimizer + Activations, saturating.
func (e MemoryEstimate) Total() int64 {
	return satInt(float64(e.Params) + float64(e.Optimizer) + float64(e.Activations))
}

// ParamCount is the number of parameters of one tower of cfg (transformer.go, gpt2.go and
// biencoder.go's initBow list them): V·H word embeddings, and for the transformer P·H position
// and 2·H token-type embeddings, an embedding LayerNorm, and per layer the four H×H attention
// projections, the H→FFN→H feed-forward and two LayerNorms, all with biases. Computed in
// float64: a config of any size gives a finite count.
func ParamCount(cfg EncoderConfig) float64 {
	v, h, f := float64(cfg.Vocab), float64(cfg.Hidden), float64(cfg.FFN)
	if cfg.Encoder != EncoderTransformer {
		return v*h + h*h + h
	}
	perLayer := 4*(h*h+h) + 2*h*f + f + h + 4*h
	return v*h + float64(cfg.MaxPosition)*h + TypeVocab*h + 2*h + float64(cfg.Layers)*perLayer
}

// EstimateTraining estimates the memory of training a bi-encoder of cfg (two towers unless
// shared) on steps of tokens tokens in all, in sequences of at most L tokens. Activations kept
// per token and layer: the attention's Q, K, V, context and output and a LayerNorm (6·H), the
// feed-forward's input and GELU (2·FFN), and one row of attention scores per head (heads·L;
// the fused attention recomputes its softmax); a bow tower keeps the gathered embeddings and
// their mean (2·H per token). It is meant as a lower estimate, so that a run it refuses could
// not have fit: the retriever step of the README's bench (all-MiniLM-L6-v2 shapes, 32 queries
// of 32 tokens and 64 passages of 256) is estimated at 3.9 GB against 3.6 GB measured.
func EstimateTraining(cfg EncoderConfig, shared bool, tokens, L int) MemoryEstimate {
	towers := 2.0
	if shared {
		towers = 1
	}
	p := ParamCount(cfg) * towers
	h := float64(cfg.Hidden)
	act := float64(tokens) * 2 * h
	if cfg.Encoder == EncoderTransformer {
		perToken := 6*h + 2*float64(cfg.FFN) + float64(cfg.Heads)*float64(L)
		act = float64(tokens) * (3*h + float64(cfg.Layers)*perToken)
	}
	return MemoryEstimate{Params: satInt(4 * p), Optimizer: satInt(12 * p), Activations: satInt(4 * act)}
}

func satInt(x float64) int64 {
	if !(x < math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(x)
}
