package model

import (
	"errors"
	"fmt"
)

// TypeVocab is the number of token-type (segment) embeddings of the
// transformer encoder, as in BERT (type_vocab_size = 2).
const TypeVocab = 2

// Encoder kinds.
const (
	EncoderBow         = "bow"
	EncoderTransformer = "transformer"
)

// Pooling kinds.
const (
	PoolingMean = "mean" // masked mean over real tokens
	PoolingCLS  = "cls"  // first token
)

// EncoderConfig describes one encoder tower.
type EncoderConfig struct {
	Encoder     string  // "bow" or "transformer"
	Vocab       int     // V, the tokenizer's vocabulary size
	Hidden      int     // H, the width of token vectors and of the output
	Layers      int     // transformer blocks (transformer only)
	Heads       int     // attention heads, dividing Hidden (transformer only)
	FFN         int     // feed-forward inner width (transformer only)
	MaxPosition int     // position embeddings, the longest L (transformer only)
	Dropout     float64 // dropout probability in [0,1) while training
	Pooling     string  // "mean" or "cls" ("cls": transformer only); "" means "mean"
	Causal      bool    // mask future positions (decoder-only use; transformer only)
	// Arch is the transformer's block layout: "bert" (post-LN, transformer.go) or "gpt2"
	// (pre-LN with a final LayerNorm, gpt2.go; needs Causal); "" means "bert".
	Arch string `json:",omitempty"`
}

// Validate reports the first invalid field.
func (c EncoderConfig) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("model: encoder config: %s = %v, want %s", field, v, want)
	}
	if c.Vocab <= 0 {
		return bad("vocab", c.Vocab, "> 0")
	}
	if c.Hidden <= 0 {
		return bad("hidden", c.Hidden, "> 0")
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		return bad("dropout", c.Dropout, "in [0,1)")
	}
	switch c.Pooling {
	case "", PoolingMean, PoolingCLS:
	default:
		return bad("pooling", fmt.Sprintf("%q", c.Pooling), `"mean" or "cls"`)
	}
	switch c.Encoder {
	case EncoderBow:
		if c.Pooling == PoolingCLS {
			return errors.New(`model: encoder config: pooling = "cls" needs encoder = "transformer" (bow averages its tokens)`)
		}
		if c.Causal {
			return errors.New(`model: encoder config: causal = true needs encoder = "transformer"`)
		}
		if c.Arch != "" {
			return errors.New(`model: encoder config: arch needs encoder = "transformer"`)
		}
	case EncoderTransformer:
		if c.Layers <= 0 {
			return bad("layers", c.Layers, "> 0")
		}
		if c.Heads <= 0 || c.Hidden%c.Heads != 0 {
			return bad("heads", c.Heads, fmt.Sprintf("> 0 and dividing hidden = %d", c.Hidden))
		}
		if c.FFN <= 0 {
			return bad("ffn", c.FFN, "> 0")
		}
		if c.MaxPosition <= 0 {
			return bad("max_position", c.MaxPosition, "> 0")
		}
		switch c.Arch {
		case "", ArchBERT:
		case ArchGPT2:
			if !c.Causal {
				return errors.New(`model: encoder config: arch = "gpt2" needs causal = true (GPT-2 is a decoder)`)
			}
		default:
			return bad("arch", fmt.Sprintf("%q", c.Arch), `"bert" or "gpt2"`)
		}
	default:
		return bad("encoder", fmt.Sprintf("%q", c.Encoder), `"bow" or "transformer"`)
	}
	return nil
}

func (c EncoderConfig) pooling() string {
	if c.Pooling == "" {
		return PoolingMean
	}
	return c.Pooling
}
