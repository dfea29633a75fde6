package model

import (
	"math"
	"testing"
)

// TestParamCountMatchesModel: the estimate counts exactly the parameters the model allocates.
func TestParamCountMatchesModel(t *testing.T) {
	for _, cfg := range []EncoderConfig{
		{Encoder: EncoderBow, Vocab: 50, Hidden: 8},
		{Encoder: EncoderTransformer, Vocab: 50, Hidden: 8, Layers: 3, Heads: 2, FFN: 12, MaxPosition: 16},
	} {
		for _, shared := range []bool{true, false} {
			m, err := NewBiEncoder(cfg, shared, 1)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range m.Params() {
				n += p.Value.Shape().TotalSize()
			}
			towers := 2
			if shared {
				towers = 1
			}
			if got := int(ParamCount(cfg)) * towers; got != n {
				t.Errorf("%s shared=%v: ParamCount gives %d, the model has %d", cfg.Encoder, shared, got, n)
			}
			if e := EstimateTraining(cfg, shared, 64, 16); e.Params != int64(4*n) || e.Optimizer != int64(12*n) || e.Activations <= 0 {
				t.Errorf("%s: estimate %+v for %d parameters", cfg.Encoder, e, n)
			}
		}
	}
	// The README's bench step (all-MiniLM-L6-v2, 32 x 32 + 64 x 256 tokens): 3.6 GB measured.
	mini := EncoderConfig{Encoder: EncoderTransformer, Vocab: 30522, Hidden: 384, Layers: 6, Heads: 12, FFN: 1536, MaxPosition: 512}
	if e := EstimateTraining(mini, true, 32*32+64*256, 256).Total(); e < 3.0e9 || e > 4.5e9 {
		t.Errorf("MiniLM retriever step: estimated %.2f GB, measured 3.6 GB", float64(e)/1e9)
	}
	huge := EncoderConfig{Encoder: EncoderTransformer, Vocab: 1 << 30, Hidden: 1 << 30, Layers: 1 << 30, Heads: 1, FFN: 1 << 30, MaxPosition: 1 << 30}
	if e := EstimateTraining(huge, false, 1<<60, 1<<30); e.Total() != math.MaxInt64 {
		t.Errorf("huge config: total %d, want saturated", e.Total())
	}
}
