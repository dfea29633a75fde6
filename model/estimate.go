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
// embeddings and per layer the four H×H attention projections, the H→FFN→H feed-forward and two
// LayerNorms, all with biases; BERT adds 2·H token-type embeddings and the embedding LayerNorm,
// GPT-2 (cfg.Arch = ArchGPT2, or cfg.Causal: a reader) the final LayerNorm ln_f and no
// token types (its LM head is the tied word embedding). Computed in float64: a config of any
// size gives a finite count.
func ParamCount(cfg EncoderConfig) float64 {
	v, h, f := float64(cfg.Vocab), float64(cfg.Hidden), float64(cfg.FFN)
	if cfg.Encoder != EncoderTransformer {
		return v*h + h*h + h
	}
	perLayer := 4*(h*h+h) + 2*h*f + f + h + 4*h
	n := v*h + float64(cfg.MaxPosition)*h + 2*h + float64(cfg.Layers)*perLayer
	if cfg.Arch == ArchGPT2 || cfg.Causal {
		return n
	}
	return n + TypeVocab*h
}

// TrainingShape is the largest step of training a model: Towers copies of the tower of its
// config (2 for a bi-encoder's query and passage towers, 1 for shared towers, a cross-encoder
// or a reader; 0 counts as 1), Tokens in all over its sequences of at most Length tokens, and
// LMRows next-token predictions scored by a reader's LM head (LMLogProb keeps their [LMRows, V]
// softmax for the backward pass).
type TrainingShape struct {
	Towers, Tokens, Length, LMRows int
}

// EstimateTraining estimates the memory of training a model of cfg on steps of shape s.
// Activations kept per token and layer: the attention's Q, K, V, context and output and a
// LayerNorm (6·H), the feed-forward's input and GELU (2·FFN), and one row of attention scores
// per head (heads·Length; the fused attention recomputes its softmax), plus 3·H per token for
// the embeddings; a bow tower keeps the gathered embeddings and their mean (2·H per token); an
// LM head adds LMRows·(V + H) (the softmax and the gathered rows). It is meant as a lower
// estimate, so that a run it refuses could not have fit: the retriever step of the README's
// bench (all-MiniLM-L6-v2 shapes, 32 queries of 32 tokens and 64 passages of 256) is estimated
// at 3.9 GB against 3.6 GB measured.
func EstimateTraining(cfg EncoderConfig, s TrainingShape) MemoryEstimate {
	p := ParamCount(cfg) * float64(max(s.Towers, 1))
	h, tokens := float64(cfg.Hidden), float64(s.Tokens)
	act := tokens * 2 * h
	if cfg.Encoder == EncoderTransformer {
		perToken := 6*h + 2*float64(cfg.FFN) + float64(cfg.Heads)*float64(s.Length)
		act = tokens * (3*h + float64(cfg.Layers)*perToken)
	}
	act += float64(s.LMRows) * (float64(cfg.Vocab) + h)
	return MemoryEstimate{Params: satInt(4 * p), Optimizer: satInt(12 * p), Activations: satInt(4 * act)}
}

func satInt(x float64) int64 {
	if !(x < math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(x)
}

// LlamaParamCount is the number of parameters of a LLaMA of cfg (llama.go's table): V·H
// embeddings (twice when the LM head is not tied), the final RMSNorm, and per block two RMSNorms,
// the H×H query and output projections, the H×(KVHeads·dh) key and value projections and the
// SwiGLU's gate, up (F×H) and down (H×F) matrices, none with biases.
func LlamaParamCount(cfg LlamaConfig) float64 {
	h, f, v := float64(cfg.Hidden), float64(cfg.FFN), float64(cfg.Vocab)
	kv := float64(cfg.KVHeads) * float64(cfg.HeadDim())
	n := v*h + h + float64(cfg.Layers)*(2*h+2*h*h+2*h*kv+3*h*f)
	if !cfg.TieEmbeddings {
		n += v * h
	}
	return n
}

// LlamaLoRACount is the number of adapter values of lora on a LLaMA of cfg: rank·(in + out) per
// targeted projection and block.
func LlamaLoRACount(cfg LlamaConfig, lora LoRAConfig) float64 {
	h, f := float64(cfg.Hidden), float64(cfg.FFN)
	kv := float64(cfg.KVHeads) * float64(cfg.HeadDim())
	width := map[string]float64{"q_proj": h + h, "k_proj": h + kv, "v_proj": h + kv, "o_proj": h + h,
		"gate_proj": h + f, "up_proj": h + f, "down_proj": f + h}
	var n float64
	for _, t := range lora.Targets {
		n += float64(lora.Rank) * width[t]
	}
	return n * float64(cfg.Layers)
}

// EstimateLlamaTraining estimates the memory of training a LLaMA of cfg on steps of tokens
// tokens in sequences of at most length: every parameter held, gradients and AdamW's moments for
// the trainable ones (every parameter, or the adapters of lora when not nil, which are held
// besides the frozen base), and as activations per token and block the two RMSNorms' outputs,
// the query, key/value widened to the query heads, context and output (6·H), the SwiGLU's gate,
// up and product (3·F) and one row of attention scores per head (Heads·length), plus the LM
// head's logits and softmax (2·V per token). A lower estimate, like EstimateTraining's.
func EstimateLlamaTraining(cfg LlamaConfig, lora *LoRAConfig, tokens, length int) MemoryEstimate {
	return estimateLlama(cfg, lora, tokens, length, cfg.Layers, 0)
}

// EstimateLlamaTrainingCheckpointed is EstimateLlamaTraining with gradient checkpointing
// (LlamaCheckpointed): one block's activations at a time, plus each block's input (H per token
// and block) kept for the backward pass.
func EstimateLlamaTrainingCheckpointed(cfg LlamaConfig, lora *LoRAConfig, tokens, length int) MemoryEstimate {
	return estimateLlama(cfg, lora, tokens, length, 1, cfg.Layers)
}

// estimateLlama: the activations of blocks blocks, and kept block inputs.
func estimateLlama(cfg LlamaConfig, lora *LoRAConfig, tokens, length, blocks, kept int) MemoryEstimate {
	p := LlamaParamCount(cfg)
	trainable := p
	if lora != nil {
		trainable = LlamaLoRACount(cfg, *lora)
		p += trainable
	}
	h, f, t := float64(cfg.Hidden), float64(cfg.FFN), float64(tokens)
	perToken := float64(blocks)*(6*h+3*f+float64(cfg.Heads)*float64(length)) + float64(kept)*h + 2*float64(cfg.Vocab)
	return MemoryEstimate{Params: satInt(4 * p), Optimizer: satInt(12 * trainable), Activations: satInt(4 * t * perToken)}
}
